//! OAuth 2.0 for connectors, the app's side: the authorization-code flow engram runs for a
//! user (`POST /connectors/{id}/oauth/start`, then the provider's redirect to
//! [`CALLBACK_PATH`]), and the refresh of the tokens it yields before they expire.
//!
//! A connector authorizes with OAuth when its credentials hold an `oauth` object (the user's own
//! app: `client_id`, `client_secret`; a `refresh_token` when they already hold one). The tokens
//! engram obtains are sealed into that object with the vault; a provider reads the credentials
//! with the current `access_token` in place of the `oauth` object
//! ([`OAuthCredentials::provider_view`]).
//!
//! - **State.** The `state` sent to the provider is sealed with the vault's key (bound to its
//!   purpose, so neither credentials nor console sessions open as one): the connector, its
//!   organization, an expiry ([`STATE_TTL`]), the PKCE verifier, the redirect URI, and when the
//!   connector's credentials were last changed. The callback needs no API key: only a state this
//!   instance (or one sharing its key) sealed opens, and once the flow has stored its tokens the
//!   credentials' change time moved on, so the same state is refused a second time.
//! - **Refresh** happens under the connector's lease: a sync refreshes at its start (and once
//!   more when the provider rejects the access token mid-sync); outside a sync (discovery) the
//!   lease is taken for the refresh alone. The new access token and the refresh token the server
//!   rotated to are sealed together and written in one statement fenced by the lease, so two
//!   instances never refresh one connector at once and a stale holder writes nothing.
//! - A refresh the server refuses as `invalid_grant` sets `needs_reauth` (by the sync's outcome)
//!   and scheduled syncs stop until new credentials or a new flow succeed, which clear it.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use engram_connectors::oauth::{OAuthCredentials, OAuthError, Pkce, Secret};
use engram_connectors::Provider;
use engram_store::{ConnectorRecord, ConnectorUpdate, SyncLease, SyncRequest};
use engram_types::OrgId;
use serde_json::{json, Map, Value};
use time::OffsetDateTime;

use crate::connectors::new_id;
use crate::{App, AppError, AppResult, Principal, UnixMs};
use engram_types::Scope;

/// Where providers send the user back to.
pub const CALLBACK_PATH: &str = "/connectors/oauth/callback";
/// How long a started authorization may take.
pub(crate) const STATE_TTL: Duration = Duration::from_secs(600);
/// What a state is sealed for (the seal's associated data).
const STATE_SEAL: &str = "engram-oauth-state";
/// How long a refresh outside a sync holds the connector's lease at most.
const REFRESH_LEASE: Duration = Duration::from_secs(60);
/// How long a refresh outside a sync waits for a running sync's own refresh.
const REFRESH_WAIT: Duration = Duration::from_secs(10);
/// The longest state read back (a sealed state is about 400 characters).
const STATE_MAX: usize = 4096;

/// A started authorization.
#[derive(Debug, Clone)]
pub struct OAuthStart {
    pub connector_id: String,
    /// Where to send the user.
    pub authorization_url: String,
    /// The callback the provider's app must have registered.
    pub redirect_uri: String,
    pub expires_at: UnixMs,
}

/// A finished authorization: the connector, and the sync it started when it has resources.
#[derive(Debug, Clone)]
pub struct OAuthFinished {
    pub connector_id: String,
    pub provider: String,
    pub sync_run_id: Option<String>,
    /// The console page the user started from, to send them back to (a path under
    /// `/console/`); `None` for a flow started through the API.
    pub return_to: Option<String>,
}

/// Why the credentials could not be made ready for a provider.
#[derive(Debug)]
pub(crate) enum RefreshFailure {
    /// The grant is gone: `needs_reauth`, with the reason.
    Reauthorize(String),
    /// Worth trying again later (the server unreachable or overloaded).
    Transient(String),
    /// Only the user can fix it (the app's settings).
    Blocked(String),
    /// The lease was lost while refreshing.
    Lost,
    /// Storing the tokens failed.
    App(AppError),
}

impl From<AppError> for RefreshFailure {
    fn from(err: AppError) -> Self {
        Self::App(err)
    }
}

impl From<OAuthError> for RefreshFailure {
    fn from(err: OAuthError) -> Self {
        if err.needs_reauth() {
            Self::Reauthorize(err.to_string())
        } else if err.is_transient() {
            Self::Transient(err.to_string())
        } else {
            Self::Blocked(err.to_string())
        }
    }
}

fn to_offset(at: UnixMs) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(at.as_millis()) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

fn invalid_state() -> AppError {
    AppError::InvalidParameters(
        "the authorization's `state` is unknown, already used or expired (it lives 10 minutes): \
         start again with POST /connectors/{id}/oauth/start"
            .into(),
    )
}

/// An OAuth step's failure as the caller of a route sees it.
fn flow_failure(err: OAuthError) -> AppError {
    match err {
        OAuthError::Transient { message, .. } => AppError::Provider(message),
        OAuthError::InvalidGrant { .. } | OAuthError::Denied { .. } => {
            AppError::InvalidParameters(err.to_string())
        }
        OAuthError::Rejected { .. } | OAuthError::Invalid(_) => {
            AppError::Validation(err.to_string())
        }
    }
}

impl App {
    /// The provider of a connector that authorizes with OAuth, and its `oauth` credentials.
    fn oauth_parts(
        &self,
        record: &ConnectorRecord,
        credentials: &Map<String, Value>,
    ) -> AppResult<(
        &dyn Provider,
        engram_connectors::oauth::ProviderOAuth,
        OAuthCredentials,
    )> {
        let provider = self.catalog().get(&record.provider).ok_or_else(|| {
            AppError::Forbidden(format!(
                "provider `{}` is no longer offered by this server",
                record.provider
            ))
        })?;
        let server = provider.oauth().ok_or_else(|| {
            AppError::InvalidParameters(format!(
                "provider `{}` authorizes with a token in the credentials, not OAuth",
                record.provider
            ))
        })?;
        let oauth = OAuthCredentials::read(credentials)
            .filter(|o| !o.client_id.is_empty())
            .ok_or_else(|| {
                AppError::Validation(format!(
                    "the connector's credentials hold no `oauth.client_id`: give your OAuth app's \
                     `oauth.client_id` and `oauth.client_secret` first (PATCH /connectors/{})",
                    record.id
                ))
            })?;
        Ok((provider, server, oauth))
    }

    /// The callback address: `connectors.public_url`, else the request's host over http.
    fn redirect_uri(&self, host: Option<&str>) -> AppResult<String> {
        let configured = self.config().connectors.public_url.trim_end_matches('/');
        let base = if configured.is_empty() {
            let host = host
                .filter(|h| {
                    !h.is_empty()
                        && h.len() <= 255
                        && h.chars()
                            .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
                })
                .ok_or_else(|| {
                    AppError::InvalidParameters(
                        "set connectors.public_url (the address users reach engram at): the \
                         request has no usable Host header to make the OAuth callback from"
                            .into(),
                    )
                })?;
            format!("http://{host}")
        } else {
            configured.to_owned()
        };
        Ok(format!("{base}{CALLBACK_PATH}"))
    }

    /// Whether a provider authorizes through OAuth (`POST /connectors/{id}/oauth/start`).
    pub fn offers_oauth(&self, provider: &str) -> bool {
        self.catalog()
            .get(provider)
            .is_some_and(|p| p.oauth().is_some())
    }

    /// Starts an authorization of the connector: the provider's URL to send the user to, with a
    /// sealed `state` and a PKCE challenge. `return_to`, a console page, is where the callback
    /// sends the user back (anything but a path under `/console/` is ignored).
    pub async fn start_oauth(
        &self,
        who: &Principal,
        id: &str,
        host: Option<&str>,
        return_to: Option<&str>,
    ) -> AppResult<OAuthStart> {
        who.require(Scope::Admin)?;
        // Only a page of this server's console: never a redirect elsewhere.
        let return_to = return_to
            .filter(|path| {
                path.starts_with("/console/")
                    && path.len() <= 512
                    && !path.contains("//")
                    && !path.contains('\\')
                    && path.chars().all(|c| c.is_ascii_graphic())
            })
            .unwrap_or_default();
        let record = self.own_connector(who, id).await?;
        let credentials = self.open_credentials(&record).await?;
        let (_, server, oauth) = self.oauth_parts(&record, &credentials)?;
        let redirect_uri = self.redirect_uri(host)?;
        let client = oauth
            .client(&server, &redirect_uri, self.inner.outbound.clone())
            .map_err(flow_failure)?;
        let pkce = Pkce::generate().map_err(flow_failure)?;
        let expires_at = self.now().after(STATE_TTL);
        let claims = json!({
            "connector": record.id,
            "org": record.org.as_str(),
            "expires_ms": expires_at.as_millis(),
            "verifier": pkce.verifier().expose(),
            "redirect_uri": redirect_uri,
            "credentials_at": record.credentials_updated_at.map_or(0, UnixMs::as_millis),
            "return_to": return_to,
            "nonce": new_id("st"),
        });
        let plain = serde_json::to_vec(&claims).map_err(|e| AppError::Internal(Box::new(e)))?;
        let sealed = self
            .sealer()
            .await?
            .seal(STATE_SEAL, &plain)
            .map_err(|e| AppError::Unavailable(e.to_string()))?;
        let state = URL_SAFE_NO_PAD.encode(sealed);
        let url = client.authorization_url(&state, &pkce);
        tracing::info!(connector = %record.id, provider = %record.provider, "an OAuth authorization was started");
        Ok(OAuthStart {
            connector_id: record.id,
            authorization_url: url.to_string(),
            redirect_uri,
            expires_at,
        })
    }

    /// The provider's redirect back (its query as sent): checks the state, exchanges the code,
    /// seals the tokens into the connector's credentials (clearing `needs_reauth`) and starts a
    /// sync when the connector has resources. No API key: the sealed state authenticates.
    pub async fn finish_oauth(&self, query: &str) -> AppResult<OAuthFinished> {
        let state = url::form_urlencoded::parse(query.as_bytes())
            .find(|(name, _)| name == "state")
            .map(|(_, value)| value.into_owned())
            .filter(|s| !s.is_empty() && s.len() <= STATE_MAX)
            .ok_or_else(|| {
                AppError::InvalidParameters(
                    "the callback has no `state`: it must come from the provider's redirect".into(),
                )
            })?;
        let sealed = URL_SAFE_NO_PAD
            .decode(state.as_bytes())
            .map_err(|_| invalid_state())?;
        let plain = self
            .sealer()
            .await?
            .open(STATE_SEAL, &sealed)
            .map_err(|_| invalid_state())?;
        let claims: Value = serde_json::from_slice(&plain).map_err(|_| invalid_state())?;
        let text = |name: &str| claims.get(name).and_then(Value::as_str).unwrap_or_default();
        let number = |name: &str| claims.get(name).and_then(Value::as_i64).unwrap_or_default();
        if number("expires_ms") < self.now().as_millis() {
            return Err(invalid_state());
        }
        let org = OrgId::from_trusted(text("org"));
        let record = self
            .store()
            .get_connector(&org, text("connector"))
            .await?
            .ok_or_else(invalid_state)?;
        if record.credentials_updated_at.map_or(0, UnixMs::as_millis) != number("credentials_at") {
            return Err(invalid_state());
        }
        let mut credentials = self.open_credentials(&record).await?;
        let (_, server, oauth) = self.oauth_parts(&record, &credentials)?;
        let client = oauth
            .client(&server, text("redirect_uri"), self.inner.outbound.clone())
            .map_err(flow_failure)?;
        let callback = client.callback(query).map_err(flow_failure)?;
        let pkce = Pkce::from_verifier(Secret::new(text("verifier")));
        let tokens = client
            .exchange_code(&callback.code, &pkce)
            .await
            .map_err(flow_failure)?;
        OAuthCredentials::keep(&tokens, &mut credentials);
        let sealed = self.seal(&record.id, &credentials).await?;
        let change = ConnectorUpdate {
            credentials: Some(sealed),
            ..ConnectorUpdate::default()
        };
        let record = self
            .store()
            .update_connector(&org, &record.id, &change, self.now())
            .await?
            .ok_or_else(|| AppError::ConnectorNotFound(record.id.clone()))?;
        tracing::info!(connector = %record.id, provider = %record.provider, "an OAuth authorization was completed");
        let sync_run_id = if record.active_resources > 0 && record.paused_at.is_none() {
            match self
                .store()
                .request_sync(&org, &record.id, &new_id("run"), self.now())
                .await?
            {
                SyncRequest::Queued(run) => Some(run),
                SyncRequest::Paused | SyncRequest::NoResources | SyncRequest::NotFound => None,
            }
        } else {
            None
        };
        self.inner.connectors.wake.notify_one();
        Ok(OAuthFinished {
            connector_id: record.id,
            provider: record.provider,
            sync_run_id,
            return_to: Some(text("return_to"))
                .filter(|path| path.starts_with("/console/"))
                .map(str::to_owned),
        })
    }

    /// Refreshes the access token under `lease` when it expires soon (or `force`, after the
    /// provider rejected it), writing the new tokens fenced by the lease. Answers the
    /// credentials to use (unchanged when nothing needed refreshing).
    pub(crate) async fn refresh_under_lease(
        &self,
        record: &ConnectorRecord,
        lease: &SyncLease,
        mut credentials: Map<String, Value>,
        force: bool,
    ) -> Result<Map<String, Value>, RefreshFailure> {
        let Some(oauth) = OAuthCredentials::read(&credentials) else {
            return Ok(credentials);
        };
        let margin = self.config().connectors.oauth_refresh_margin;
        let now = to_offset(self.now());
        let Some(refresh_token) = oauth.refresh_token.clone() else {
            if oauth.access_token.is_none() {
                return Err(RefreshFailure::Reauthorize(
                    "the connector is not authorized yet: run POST /connectors/{id}/oauth/start"
                        .into(),
                ));
            }
            // A token without a refresh token is used until the provider rejects it.
            return Ok(credentials);
        };
        if !force && !oauth.wants_refresh(now, margin) {
            return Ok(credentials);
        }
        let (_, server, oauth) = self.oauth_parts(record, &credentials)?;
        let client = oauth.client(&server, "", self.inner.outbound.clone())?;
        let tokens = client.refresh(&refresh_token).await?;
        OAuthCredentials::keep(&tokens, &mut credentials);
        let sealed = self.seal(&record.id, &credentials).await?;
        if !self
            .store()
            .replace_credentials(lease, &sealed, self.now())
            .await
            .map_err(AppError::from)?
        {
            return Err(RefreshFailure::Lost);
        }
        tracing::info!(connector = %record.id, "the connector's OAuth access token was refreshed");
        Ok(credentials)
    }

    /// The credentials as a provider reads them outside a sync (discovery): an access token
    /// about to expire is refreshed under the connector's lease, taken for it; when a sync holds
    /// the lease, its own refresh is waited for.
    pub(crate) async fn provider_credentials(
        &self,
        record: &ConnectorRecord,
    ) -> AppResult<Map<String, Value>> {
        let mut record = record.clone();
        let waited = tokio::time::Instant::now();
        loop {
            let credentials = self.open_credentials(&record).await?;
            let Some(oauth) = OAuthCredentials::read(&credentials) else {
                return Ok(credentials);
            };
            let margin = self.config().connectors.oauth_refresh_margin;
            if oauth.access_token.is_none() && oauth.refresh_token.is_none() {
                return Err(AppError::Validation(format!(
                    "the connector is not authorized yet: POST /connectors/{}/oauth/start and \
                     open the URL it answers",
                    record.id
                )));
            }
            if !oauth.wants_refresh(to_offset(self.now()), margin) {
                return Ok(OAuthCredentials::provider_view(&credentials));
            }
            if let Some(lease) = self
                .take_connector_lease(&record, "refresh", REFRESH_LEASE)
                .await?
            {
                // Read again under the lease: another holder may have just refreshed.
                let (current, credentials) = self.current_credentials(&record).await?;
                let refreshed = self
                    .refresh_under_lease(&current, &lease, credentials, false)
                    .await;
                self.store().release_lease(&lease).await?;
                return match refreshed {
                    Ok(credentials) => Ok(OAuthCredentials::provider_view(&credentials)),
                    Err(RefreshFailure::Reauthorize(reason)) => Err(AppError::Provider(format!(
                        "{reason}; POST /connectors/{}/oauth/start to authorize it again",
                        record.id
                    ))),
                    Err(RefreshFailure::Transient(reason)) => Err(AppError::Provider(reason)),
                    Err(RefreshFailure::Blocked(reason)) => Err(AppError::Validation(reason)),
                    Err(RefreshFailure::Lost) => Err(AppError::Unavailable(
                        "the connector's token refresh lost its lease; try again".into(),
                    )),
                    Err(RefreshFailure::App(err)) => Err(err),
                };
            }
            if waited.elapsed() >= REFRESH_WAIT {
                return Err(AppError::Unavailable(
                    "a sync of this connector is refreshing its OAuth token; try again in a moment"
                        .into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
            record = self
                .store()
                .get_connector(&record.org, &record.id)
                .await?
                .ok_or_else(|| AppError::ConnectorNotFound(record.id.clone()))?;
        }
    }
}
