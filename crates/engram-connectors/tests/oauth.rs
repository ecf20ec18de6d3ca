//! The OAuth client against a real authorization server: npm's oidc-provider (OpenID
//! certified), run by `scripts/oauth-server/server.mjs` from the cache `make setup-test` fills
//! (`.cache/oauth-server` at the workspace root, or under `ENGRAM_CACHE_DIR`). Without Node.js or
//! the package these tests fail, saying what to run; they are never skipped.
//!
//! The server's test routes play the user (login and consent in a browser), revoke a grant and
//! make the token endpoint fail for a while; everything the client does goes to the server's
//! standard endpoints, through the outbound client with private addresses allowed.

use base64::Engine as _;
use std::time::Duration;

use engram_connectors::oauth::{
    ClientAuth, OAuthClient, OAuthConfig, OAuthError, Pkce, Secret, TokenSet,
};
use engram_connectors::ProviderError;
use engram_outbound::{AddressPolicy, Outbound, Url};
use engram_testkit::{OAuthServer, OAuthServerOptions};
use serde_json::{json, Value};
use time::OffsetDateTime;

const CLIENT_ID: &str = "engram-test";
/// Characters Basic authentication must form-encode (RFC 6749 2.3.1).
const CLIENT_SECRET: &str = "s3cret:with/odd+chars&more";
const REDIRECT_URI: &str = "http://127.0.0.1:9/oauth/callback";
const STATE: &str = "con_1.org_1.1800000000.sealed";

/// A running oidc-provider (stopped when dropped) and its endpoints.
struct AuthServer {
    _process: OAuthServer,
    issuer: String,
    token_endpoint: Url,
    authorization_endpoint: Url,
    introspection_endpoint: Url,
    auth_method: ClientAuth,
    outbound: Outbound,
}

impl AuthServer {
    /// Starts a server whose access tokens live `access_ttl` seconds and whose one client
    /// authenticates with `auth_method`.
    async fn start(access_ttl: u64, auth_method: ClientAuth) -> Self {
        let method = match auth_method {
            ClientAuth::Basic => "client_secret_basic",
            ClientAuth::Post => "client_secret_post",
        };
        let process = OAuthServer::start(&OAuthServerOptions {
            client_id: CLIENT_ID.to_owned(),
            client_secret: CLIENT_SECRET.to_owned(),
            redirect_uri: REDIRECT_URI.to_owned(),
            auth_method: method.to_owned(),
            access_ttl,
        });
        let issuer = process.issuer.clone();
        let outbound = Outbound::new(AddressPolicy {
            allow_private: true,
        })
        .expect("outbound client");
        let mut server = Self {
            _process: process,
            issuer: issuer.clone(),
            token_endpoint: Url::parse("http://unset").expect("url"),
            authorization_endpoint: Url::parse("http://unset").expect("url"),
            introspection_endpoint: Url::parse("http://unset").expect("url"),
            auth_method,
            outbound,
        };
        // Where its endpoints are, from its discovery document.
        let discovery: Value = server
            .get_json(&format!("{issuer}/.well-known/openid-configuration"))
            .await;
        let endpoint =
            |name: &str| Url::parse(discovery[name].as_str().expect("an endpoint")).expect("a URL");
        server.token_endpoint = endpoint("token_endpoint");
        server.authorization_endpoint = endpoint("authorization_endpoint");
        server.introspection_endpoint = endpoint("introspection_endpoint");
        assert_eq!(
            discovery["code_challenge_methods_supported"],
            json!(["S256"])
        );
        server
    }

    fn config(&self) -> OAuthConfig {
        OAuthConfig {
            authorization_endpoint: self.authorization_endpoint.clone(),
            token_endpoint: self.token_endpoint.clone(),
            client_id: CLIENT_ID.to_owned(),
            client_secret: Some(Secret::new(CLIENT_SECRET)),
            client_auth: self.auth_method,
            redirect_uri: REDIRECT_URI.to_owned(),
            scope: Some("read write".to_owned()),
            issuer: Some(self.issuer.clone()),
            extra_authorization_params: Vec::new(),
        }
    }

    fn client(&self) -> OAuthClient {
        OAuthClient::new(self.config(), self.outbound.clone())
    }

    async fn get_json(&self, url: &str) -> Value {
        let url = Url::parse(url).expect("a URL");
        let answer = self
            .outbound
            .get_read(&url, &[], Duration::from_secs(30), 1 << 20)
            .await
            .expect("the OAuth server answers");
        assert_eq!(answer.status, 200, "GET {url}");
        serde_json::from_slice(&answer.body).expect("JSON")
    }

    /// POSTs JSON to one of the server's test routes.
    async fn test_route(&self, path: &str, body: Value) -> Value {
        let url = Url::parse(&format!("{}{path}", self.issuer)).expect("a URL");
        let answer = self
            .outbound
            .request_read(
                "POST",
                &url,
                &[("content-type", "application/json".to_owned())],
                Some(body.to_string().into_bytes()),
                Duration::from_secs(30),
                1 << 20,
            )
            .await
            .expect("the OAuth server answers");
        assert_eq!(answer.status, 200, "POST {path}");
        serde_json::from_slice(&answer.body).expect("JSON")
    }

    /// The user opens `url`, logs in and consents: where the server sends the browser back.
    async fn authorize(&self, url: &Url) -> Url {
        let answer = self
            .test_route("/test/authorize", json!({ "url": url.as_str() }))
            .await;
        let location = answer["location"]
            .as_str()
            .unwrap_or_else(|| panic!("the authorization ended on a page: {answer}"));
        Url::parse(location).expect("a redirect URL")
    }

    /// The code of a completed authorization started by `client`, and its PKCE pair.
    async fn authorized_code(&self, client: &OAuthClient) -> (Secret, Pkce) {
        let start = client.start(STATE).expect("start");
        let back = self.authorize(&start.url).await;
        assert!(back.as_str().starts_with(REDIRECT_URI), "{back}");
        let callback = client
            .callback(back.query().unwrap_or_default())
            .expect("a callback with a code");
        assert_eq!(callback.state, STATE);
        (callback.code, start.pkce)
    }

    /// A full authorization: the tokens of a new grant.
    async fn tokens(&self, client: &OAuthClient) -> TokenSet {
        let (code, pkce) = self.authorized_code(client).await;
        client.exchange_code(&code, &pkce).await.expect("tokens")
    }

    /// Whether the server holds `token` active (token introspection, RFC 7662).
    async fn active(&self, token: &Secret) -> bool {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("token", token.expose());
        let mut headers = vec![(
            "content-type",
            "application/x-www-form-urlencoded".to_owned(),
        )];
        match self.auth_method {
            ClientAuth::Post => {
                form.append_pair("client_id", CLIENT_ID);
                form.append_pair("client_secret", CLIENT_SECRET);
            }
            ClientAuth::Basic => {
                let secret: String =
                    url::form_urlencoded::byte_serialize(CLIENT_SECRET.as_bytes()).collect();
                let pair = format!("{CLIENT_ID}:{secret}");
                headers.push((
                    "authorization",
                    format!(
                        "Basic {}",
                        base64::engine::general_purpose::STANDARD.encode(pair)
                    ),
                ));
            }
        }
        let body = form.finish();
        let answer = self
            .outbound
            .request_read(
                "POST",
                &self.introspection_endpoint,
                &headers,
                Some(body.into_bytes()),
                Duration::from_secs(30),
                1 << 20,
            )
            .await
            .expect("introspection answers");
        assert_eq!(answer.status, 200);
        let answer: Value = serde_json::from_slice(&answer.body).expect("JSON");
        answer["active"] == json!(true)
    }
}

/// Neither the `Debug` nor the `Display` of `shown` holds any of `secrets`.
fn assert_hides(shown: &(impl std::fmt::Debug + ?Sized), display: &str, secrets: &[&Secret]) {
    let debug = format!("{shown:?}");
    for secret in secrets {
        let value = secret.expose();
        assert!(!debug.contains(value), "Debug shows a secret: {debug}");
        assert!(
            !display.contains(value),
            "Display shows a secret: {display}"
        );
    }
}

fn all_secrets(tokens: &TokenSet) -> Vec<&Secret> {
    let mut secrets = vec![&tokens.access_token];
    secrets.extend(tokens.refresh_token.as_ref());
    secrets
}

#[tokio::test]
async fn code_flow_with_pkce_yields_tokens_the_server_accepts() {
    let server = AuthServer::start(60, ClientAuth::Basic).await;
    let client = server.client();

    let start = client.start(STATE).expect("start");
    let query: Vec<(String, String)> = start.url.query_pairs().into_owned().collect();
    let param = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(param("response_type"), Some("code"));
    assert_eq!(param("code_challenge_method"), Some("S256"));
    assert_eq!(param("code_challenge"), Some(start.pkce.challenge()));
    assert_eq!(param("state"), Some(STATE));
    assert_eq!(param("redirect_uri"), Some(REDIRECT_URI));
    assert!(!start.url.as_str().contains(start.pkce.verifier().expose()));

    let back = server.authorize(&start.url).await;
    let callback = client
        .callback(back.query().unwrap_or_default())
        .expect("callback");
    assert_eq!(callback.state, STATE);

    let before = OffsetDateTime::now_utc();
    let tokens = client
        .exchange_code(&callback.code, &start.pkce)
        .await
        .expect("the code is exchanged");
    assert!(server.active(&tokens.access_token).await);
    assert!(tokens.refresh_token.is_some(), "a refresh token is issued");
    assert_eq!(tokens.token_type, "Bearer");
    assert_eq!(tokens.scope.as_deref(), Some("read write"));
    let expires_at = tokens.expires_at.expect("an expiry");
    let lifetime = expires_at - before;
    assert!(
        lifetime <= time::Duration::seconds(61) && lifetime >= time::Duration::seconds(58),
        "{lifetime}"
    );
    let mut secrets = all_secrets(&tokens);
    secrets.extend([&callback.code, start.pkce.verifier()]);
    assert_hides(&tokens, "", &secrets);
    assert_hides(&callback, "", &secrets);
    assert_hides(&start, "", &secrets);
    assert_hides(&client, "", &[&Secret::new(CLIENT_SECRET)]);

    // A code serves once.
    let again = client
        .exchange_code(&callback.code, &start.pkce)
        .await
        .expect_err("a used code");
    assert!(again.needs_reauth(), "{again}");
    assert_hides(&again, &again.to_string(), &secrets);

    // Without the verifier its authorization was started with, a code is refused (PKCE).
    let (code, _) = server.authorized_code(&client).await;
    let other = Pkce::generate().expect("pkce");
    let err = client
        .exchange_code(&code, &other)
        .await
        .expect_err("the wrong verifier");
    assert!(
        matches!(&err, OAuthError::InvalidGrant { error, .. } if error == "invalid_grant"),
        "{err:?}"
    );
    assert_hides(&err, &err.to_string(), &[&code, other.verifier()]);
}

#[tokio::test]
async fn refresh_rotates_the_refresh_token_and_the_old_one_is_refused() {
    let server = AuthServer::start(60, ClientAuth::Basic).await;
    let client = server.client();
    let first = server.tokens(&client).await;
    let first_refresh = first.refresh_token.clone().expect("a refresh token");

    let second = client.refresh(&first_refresh).await.expect("refreshed");
    let second_refresh = second.refresh_token.clone().expect("a refresh token");
    assert_ne!(second_refresh.expose(), first_refresh.expose(), "rotated");
    assert_ne!(second.access_token.expose(), first.access_token.expose());
    assert!(server.active(&second.access_token).await);

    // The rotated token refreshes in turn.
    let third = client.refresh(&second_refresh).await.expect("refreshed");
    let third_refresh = third.refresh_token.clone().expect("a refresh token");
    assert_ne!(third_refresh.expose(), second_refresh.expose());

    // The first one no longer works: the grant is refused, and needs reauthorization.
    let err = client
        .refresh(&first_refresh)
        .await
        .expect_err("a used refresh token");
    assert!(err.needs_reauth() && !err.is_transient(), "{err:?}");
    let mut secrets = all_secrets(&first);
    secrets.extend(all_secrets(&second));
    secrets.extend(all_secrets(&third));
    assert_hides(&err, &err.to_string(), &secrets);
    assert!(matches!(
        ProviderError::from(err),
        ProviderError::Unauthorized { .. }
    ));

    // oidc-provider (like most servers that rotate) takes a used token coming back as theft and
    // revokes the grant: the newest token is refused too. Why a rotated token must be stored
    // with the access token, in one transaction.
    let err = client
        .refresh(&third_refresh)
        .await
        .expect_err("the grant is revoked");
    assert!(err.needs_reauth(), "{err:?}");
    assert!(!server.active(&third.access_token).await);
}

#[tokio::test]
async fn an_expired_access_token_is_refreshed() {
    let server = AuthServer::start(4, ClientAuth::Basic).await;
    let client = server.client();
    let tokens = server.tokens(&client).await;
    assert!(server.active(&tokens.access_token).await);
    let expires_at = tokens.expires_at.expect("an expiry");
    assert!(tokens.expires_within(OffsetDateTime::now_utc(), Duration::from_secs(60)));

    let wait = expires_at - OffsetDateTime::now_utc() + time::Duration::milliseconds(1500);
    tokio::time::sleep(wait.try_into().unwrap_or_default()).await;
    assert!(tokens.expires_within(OffsetDateTime::now_utc(), Duration::ZERO));
    assert!(
        !server.active(&tokens.access_token).await,
        "the access token has expired"
    );

    let refresh = tokens.refresh_token.as_ref().expect("a refresh token");
    let fresh = client.refresh(refresh).await.expect("refreshed");
    assert!(server.active(&fresh.access_token).await);
    assert!(!fresh.expires_within(OffsetDateTime::now_utc(), Duration::ZERO));
    assert_ne!(
        fresh.refresh_token.as_ref().expect("rotated").expose(),
        refresh.expose()
    );
}

#[tokio::test]
async fn a_revoked_grant_answers_invalid_grant() {
    let server = AuthServer::start(60, ClientAuth::Basic).await;
    let client = server.client();
    let tokens = server.tokens(&client).await;
    let refresh = tokens.refresh_token.as_ref().expect("a refresh token");

    let revoked = server.test_route("/test/revoke", json!({})).await;
    assert_eq!(revoked["revoked"], json!(1));

    let err = client.refresh(refresh).await.expect_err("revoked");
    assert!(
        matches!(&err, OAuthError::InvalidGrant { error, .. } if error == "invalid_grant"),
        "{err:?}"
    );
    assert!(err.needs_reauth());
    let message = err.to_string();
    assert!(message.contains("invalid_grant"), "{message}");
    assert_hides(&err, &message, &all_secrets(&tokens));
    let provider = ProviderError::from(err);
    assert!(
        matches!(provider, ProviderError::Unauthorized { .. }),
        "{provider:?}"
    );
    assert_hides(&provider, &provider.to_string(), &all_secrets(&tokens));
}

#[tokio::test]
async fn outages_are_transient_and_keep_the_refresh_token_usable() {
    let server = AuthServer::start(60, ClientAuth::Basic).await;
    let client = server.client();
    let tokens = server.tokens(&client).await;
    let refresh = tokens.refresh_token.as_ref().expect("a refresh token");

    for status in [503, 500, 429] {
        server
            .test_route("/test/fail", json!({ "count": 1, "status": status }))
            .await;
        let err = client.refresh(refresh).await.expect_err("an outage");
        assert!(err.is_transient() && !err.needs_reauth(), "{err:?}");
        assert_eq!(err.http_status(), status);
        assert_hides(&err, &err.to_string(), &all_secrets(&tokens));
    }
    // Nothing was used up: the same refresh token still works.
    let fresh = client
        .refresh(refresh)
        .await
        .expect("refreshed after the outage");
    assert!(server.active(&fresh.access_token).await);

    // A server that cannot be reached at all.
    let mut config = server.config();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    config.token_endpoint = Url::parse(&format!("http://127.0.0.1:{port}/token")).expect("url");
    let unreachable = OAuthClient::new(config, server.outbound.clone());
    let err = unreachable
        .refresh(fresh.refresh_token.as_ref().expect("a refresh token"))
        .await
        .expect_err("unreachable");
    assert!(err.is_transient(), "{err:?}");

    // Without private addresses allowed, the outbound policy refuses the server: a setting to
    // fix, not an outage.
    let strict = OAuthClient::new(
        server.config(),
        Outbound::new(AddressPolicy::default()).expect("outbound"),
    );
    let err = strict
        .refresh(fresh.refresh_token.as_ref().expect("a refresh token"))
        .await
        .expect_err("refused");
    assert!(
        matches!(err, OAuthError::Invalid(_)) && !err.is_transient(),
        "{err:?}"
    );
}

#[tokio::test]
async fn client_secret_post_works_and_a_wrong_secret_is_rejected() {
    let server = AuthServer::start(60, ClientAuth::Post).await;
    let client = server.client();
    let tokens = server.tokens(&client).await;
    assert!(server.active(&tokens.access_token).await);
    let refresh = tokens.refresh_token.as_ref().expect("a refresh token");
    let fresh = client.refresh(refresh).await.expect("refreshed");

    let wrong = Secret::new("not-the-secret");
    let mut config = server.config();
    config.client_secret = Some(wrong.clone());
    let err = OAuthClient::new(config, server.outbound.clone())
        .refresh(fresh.refresh_token.as_ref().expect("a refresh token"))
        .await
        .expect_err("a wrong secret");
    assert!(
        matches!(&err, OAuthError::Rejected { error, http_status: 401, .. } if error == "invalid_client"),
        "{err:?}"
    );
    assert!(!err.needs_reauth() && !err.is_transient());
    let mut secrets = all_secrets(&fresh);
    secrets.push(&wrong);
    assert_hides(&err, &err.to_string(), &secrets);
    // A setting only the user can fix: the connector is blocked, not asked to reauthorize.
    let provider = ProviderError::from(err);
    assert!(
        matches!(provider, ProviderError::Invalid(_)),
        "{provider:?}"
    );
}

#[tokio::test]
async fn callbacks_carry_refusals_and_are_checked_against_the_issuer() {
    let server = AuthServer::start(60, ClientAuth::Basic).await;

    // No login session and no prompt allowed: the server refuses through the redirect.
    let mut config = server.config();
    config
        .extra_authorization_params
        .push(("prompt".to_owned(), "none".to_owned()));
    let client = OAuthClient::new(config, server.outbound.clone());
    let start = client.start(STATE).expect("start");
    let back = server.authorize(&start.url).await;
    let err = client
        .callback(back.query().unwrap_or_default())
        .expect_err("refused");
    assert!(
        matches!(&err, OAuthError::Denied { error, .. } if error == "login_required"),
        "{err:?}"
    );
    assert!(!err.needs_reauth() && !err.is_transient());

    // An answer that names another issuer is not trusted (a mix-up of servers).
    let mut config = server.config();
    config.issuer = Some("https://accounts.example.com".to_owned());
    let client = OAuthClient::new(config, server.outbound.clone());
    let start = client.start(STATE).expect("start");
    let back = server.authorize(&start.url).await;
    assert!(back.query_pairs().any(|(k, _)| k == "code"));
    let err = client
        .callback(back.query().unwrap_or_default())
        .expect_err("another issuer");
    assert!(matches!(err, OAuthError::Invalid(_)), "{err:?}");
    // Nor one without its code or state.
    let client = server.client();
    assert!(matches!(
        client.callback("state=x"),
        Err(OAuthError::Invalid(_))
    ));
    assert!(matches!(
        client.callback("code=x"),
        Err(OAuthError::Invalid(_))
    ));
}
