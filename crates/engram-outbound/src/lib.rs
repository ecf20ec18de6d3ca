//! engram's only outbound HTTP client. Every request to a URL a user gave us (webhooks,
//! connectors) goes through [`Outbound`], which refuses loopback, private, link-local,
//! unique-local and other non-public addresses unless the policy allows them
//! (`outbound_allow_private`, for local development and tests).
//!
//! The address check runs after DNS resolution on every new connection (the resolver given to
//! the HTTP client filters what a name resolves to), so a name that changes what it points at
//! cannot reach an internal service. IP literals, which skip the resolver, are checked before
//! sending. Redirects are not followed and proxies are not used, so neither can route around
//! the check.

use std::error::Error as StdError;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use engram_types::FailureCode;
use hmac::{Hmac, Mac};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use sha2::Sha256;
pub use url::Url;

/// Which addresses outbound requests may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AddressPolicy {
    /// Allow loopback and private addresses (and plain `http`).
    pub allow_private: bool,
}

impl AddressPolicy {
    pub fn permits(&self, ip: IpAddr) -> bool {
        self.allow_private || is_public(ip)
    }

    /// Schemes a target URL may use: `https` only, plus `http` when private addresses are allowed.
    pub fn permits_scheme(&self, scheme: &str) -> bool {
        scheme == "https" || (self.allow_private && scheme == "http")
    }
}

/// Whether an address is on the public internet: not loopback, private, link-local,
/// unique-local, shared (CGNAT), unspecified, multicast, broadcast or documentation space.
/// IPv4-mapped and IPv4-compatible IPv6 addresses are judged as the IPv4 address they carry.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b)) // shared address space (RFC 6598)
                || (a == 192 && b == 0 && v4.octets()[2] == 0) // IETF protocol assignments
                || (a == 198 && (18..20).contains(&b)) // benchmarking (RFC 2544)
                || a >= 240) // reserved
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let segments = v6.segments();
            if segments[..6] == [0; 6] && !v6.is_loopback() && !v6.is_unspecified() {
                // IPv4-compatible (deprecated) form.
                return is_public(IpAddr::V4(std::net::Ipv4Addr::from(
                    (u32::from(segments[6]) << 16) | u32::from(segments[7]),
                )));
            }
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || v6.is_unique_local()
                || v6.is_unicast_link_local()
                || segments[0] == 0x2001 && segments[1] == 0x0db8 // documentation
                || segments[0] == 0x0064 && segments[1] == 0xff9b) // NAT64 to embedded IPv4
        }
    }
}

/// Why an outbound request was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    #[error("`{0}` is not a valid absolute URL")]
    InvalidUrl(String),
    #[error("the URL must use https")]
    SchemeNotAllowed,
    #[error("`{host}` is {addr}, a loopback, private or otherwise non-public address")]
    AddressRefused { host: String, addr: IpAddr },
    #[error("`{0}` does not resolve to any address")]
    Unresolvable(String),
    #[error("the receiver did not answer within {0} ms")]
    Timeout(u64),
    #[error("could not connect: {0}")]
    Connect(String),
    #[error("request failed: {0}")]
    Request(String),
}

impl OutboundError {
    /// A stable code for delivery records and logs.
    pub fn code(&self) -> FailureCode {
        match self {
            Self::InvalidUrl(_) | Self::SchemeNotAllowed => FailureCode::InvalidUrl,
            Self::AddressRefused { .. } => FailureCode::AddressRefused,
            Self::Unresolvable(_) => FailureCode::DnsFailed,
            Self::Timeout(_) => FailureCode::Timeout,
            Self::Connect(_) => FailureCode::ConnectionFailed,
            Self::Request(_) => FailureCode::RequestFailed,
        }
    }
}

/// The refusal raised inside the resolver, found again in reqwest's error chain.
#[derive(Debug, thiserror::Error)]
#[error("`{host}` resolves to {addr}, which the outbound policy refuses")]
struct Refused {
    host: String,
    addr: IpAddr,
}

/// Resolves names with the system resolver and drops what the policy refuses; a name whose
/// every address is refused fails to connect.
#[derive(Debug, Clone)]
struct PolicyResolver {
    policy: AddressPolicy,
}

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let (allowed, refused) = resolve(&host, policy).await?;
            if allowed.is_empty() {
                let addr = refused.ok_or_else(|| OutboundError::Unresolvable(host.clone()))?;
                return Err(Box::new(Refused { host, addr }) as Box<dyn StdError + Send + Sync>);
            }
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

/// The addresses `host` resolves to that the policy permits, and one it refused (if any).
async fn resolve(
    host: &str,
    policy: AddressPolicy,
) -> Result<(Vec<SocketAddr>, Option<IpAddr>), OutboundError> {
    let found = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|_| OutboundError::Unresolvable(host.to_owned()))?;
    let (mut allowed, mut refused) = (Vec::new(), None);
    for addr in found {
        if policy.permits(addr.ip()) {
            allowed.push(addr);
        } else {
            refused = Some(addr.ip());
        }
    }
    Ok((allowed, refused))
}

/// The outbound HTTP client. Cheap to clone.
#[derive(Clone)]
pub struct Outbound {
    client: reqwest::Client,
    policy: AddressPolicy,
}

/// A receiver's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
}

impl Answer {
    pub fn is_success(self) -> bool {
        (200..300).contains(&self.status)
    }
}

impl Outbound {
    pub fn new(policy: AddressPolicy) -> Result<Self, OutboundError> {
        let client = reqwest::Client::builder()
            .user_agent(concat!("engram/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(PolicyResolver { policy }))
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| OutboundError::Request(e.to_string()))?;
        Ok(Self { client, policy })
    }

    pub fn policy(&self) -> AddressPolicy {
        self.policy
    }

    /// Checks a target URL as given by a user: absolute, an allowed scheme, and a host that is
    /// (or resolves only to) permitted addresses. Deliveries check again at every connect.
    pub async fn check_url(&self, raw: &str) -> Result<Url, OutboundError> {
        let url = Url::parse(raw).map_err(|_| OutboundError::InvalidUrl(raw.to_owned()))?;
        if !self.policy.permits_scheme(url.scheme()) {
            return Err(OutboundError::SchemeNotAllowed);
        }
        match url.host() {
            None => Err(OutboundError::InvalidUrl(raw.to_owned())),
            Some(url::Host::Ipv4(ip)) => self.check_ip(&url, IpAddr::V4(ip)).map(|()| url),
            Some(url::Host::Ipv6(ip)) => self.check_ip(&url, IpAddr::V6(ip)).map(|()| url),
            Some(url::Host::Domain(name)) => {
                let (allowed, refused) = resolve(name, self.policy).await?;
                match refused {
                    // Every address must pass: a name that also points inside is refused.
                    Some(addr) => Err(OutboundError::AddressRefused {
                        host: name.to_owned(),
                        addr,
                    }),
                    None if allowed.is_empty() => Err(OutboundError::Unresolvable(name.to_owned())),
                    None => Ok(url),
                }
            }
        }
    }

    /// The scheme and a literal address of `url` (names are checked as they resolve).
    fn check_target(&self, url: &Url) -> Result<(), OutboundError> {
        if !self.policy.permits_scheme(url.scheme()) {
            return Err(OutboundError::SchemeNotAllowed);
        }
        match url.host() {
            Some(url::Host::Ipv4(ip)) => self.check_ip(url, IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => self.check_ip(url, IpAddr::V6(ip)),
            Some(url::Host::Domain(_)) => Ok(()),
            None => Err(OutboundError::InvalidUrl(url.to_string())),
        }
    }

    fn check_ip(&self, url: &Url, ip: IpAddr) -> Result<(), OutboundError> {
        if self.policy.permits(ip) {
            Ok(())
        } else {
            Err(OutboundError::AddressRefused {
                host: url.host_str().unwrap_or_default().to_owned(),
                addr: ip,
            })
        }
    }

    /// GETs `url` with the given headers, within `timeout`, and reads at most `max_bytes` of
    /// the body (a longer body is an error). Redirects are not followed (a `3xx` comes back).
    pub async fn get_read(
        &self,
        url: &Url,
        headers: &[(&str, String)],
        timeout: Duration,
        max_bytes: usize,
    ) -> Result<Fetched, OutboundError> {
        self.request_read("GET", url, headers, None, timeout, max_bytes)
            .await
    }

    /// Sends a request of any method (`PROPFIND` for WebDAV) like [`Outbound::get_read`].
    pub async fn request_read(
        &self,
        method: &str,
        url: &Url,
        headers: &[(&str, String)],
        body: Option<Vec<u8>>,
        timeout: Duration,
        max_bytes: usize,
    ) -> Result<Fetched, OutboundError> {
        self.check_target(url)?;
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|_| OutboundError::Request(format!("`{method}` is not an HTTP method")))?;
        let mut request = self.client.request(method, url.clone()).timeout(timeout);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        if let Some(body) = body {
            request = request.body(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| classify(e, timeout, url))?;
        read_bounded(response, url, timeout, max_bytes).await
    }

    /// POSTs a JSON body like [`Outbound::post_json`] and hands back the answer to read as it
    /// arrives (server-sent events): `timeout` bounds the wait for the answer to start and for
    /// each piece after it (not the whole, which a long stream may pass), and at most
    /// `max_bytes` of body are read.
    pub async fn post_json_streamed(
        &self,
        url: &Url,
        headers: &[(&str, String)],
        body: Vec<u8>,
        timeout: Duration,
        max_bytes: usize,
    ) -> Result<Streamed, OutboundError> {
        self.check_target(url)?;
        let mut request = self
            .client
            .post(url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let waited = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let response = tokio::time::timeout(timeout, request.send())
            .await
            .map_err(|_| OutboundError::Timeout(waited))?
            .map_err(|e| classify(e, timeout, url))?;
        Ok(Streamed {
            status: response.status().as_u16(),
            response,
            url: url.clone(),
            timeout,
            left: max_bytes,
        })
    }

    /// POSTs a JSON body with the given headers, within `timeout` for the whole exchange. The
    /// response body is not read.
    pub async fn post_json(
        &self,
        url: &Url,
        headers: &[(&str, String)],
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Answer, OutboundError> {
        let response = self.send_json(url, headers, body, timeout).await?;
        Ok(Answer {
            status: response.status().as_u16(),
        })
    }

    async fn send_json(
        &self,
        url: &Url,
        headers: &[(&str, String)],
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<reqwest::Response, OutboundError> {
        self.check_target(url)?;
        let mut request = self
            .client
            .post(url.clone())
            .timeout(timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        request.send().await.map_err(|e| classify(e, timeout, url))
    }
}

/// An answer read whole: its status, the headers a reader may need, and the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub status: u16,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    pub content_type: Option<String>,
    /// Where a redirect points (not followed).
    pub location: Option<String>,
    /// Every header of the answer that is text, names lowercased (rate limits: `Retry-After`,
    /// `X-RateLimit-*`; pagination: `Link`).
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Fetched {
    /// The first value of the header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An answer whose body is read piece by piece, as the receiver sends it.
pub struct Streamed {
    pub status: u16,
    response: reqwest::Response,
    url: Url,
    timeout: Duration,
    /// Bytes the body may still have.
    left: usize,
}

impl Streamed {
    /// The next piece of the body as it arrived; `None` at its end. A body past the bound
    /// given is an error.
    pub async fn next(&mut self) -> Result<Option<Vec<u8>>, OutboundError> {
        let waited = u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX);
        let Some(piece) = tokio::time::timeout(self.timeout, self.response.chunk())
            .await
            .map_err(|_| OutboundError::Timeout(waited))?
            .map_err(|e| classify(e, self.timeout, &self.url))?
        else {
            return Ok(None);
        };
        self.left = self.left.checked_sub(piece.len()).ok_or_else(|| {
            OutboundError::Request("the answer is longer than its bound".to_owned())
        })?;
        Ok(Some(piece.to_vec()))
    }

    /// The rest of the body, within the same bound.
    pub async fn rest(mut self) -> Result<Vec<u8>, OutboundError> {
        let mut body = Vec::new();
        while let Some(piece) = self.next().await? {
            body.extend_from_slice(&piece);
        }
        Ok(body)
    }
}

/// Reads a response's body, refusing more than `max_bytes`.
async fn read_bounded(
    mut response: reqwest::Response,
    url: &Url,
    timeout: Duration,
    max_bytes: usize,
) -> Result<Fetched, OutboundError> {
    let header = |name: reqwest::header::HeaderName| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (etag, last_modified, content_type, location) = (
        header(reqwest::header::ETAG),
        header(reqwest::header::LAST_MODIFIED),
        header(reqwest::header::CONTENT_TYPE),
        header(reqwest::header::LOCATION),
    );
    let headers = response
        .headers()
        .iter()
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect();
    let status = response.status().as_u16();
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| classify(e, timeout, url))?
    {
        if body.len() + chunk.len() > max_bytes {
            return Err(OutboundError::Request(format!(
                "the answer is longer than {max_bytes} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Fetched {
        status,
        etag,
        last_modified,
        content_type,
        location,
        headers,
        body,
    })
}

/// Maps a reqwest failure onto our errors, finding a resolver refusal in its chain.
fn classify(err: reqwest::Error, timeout: Duration, url: &Url) -> OutboundError {
    let mut source: Option<&(dyn StdError + 'static)> = Some(&err);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<Refused>() {
            return OutboundError::AddressRefused {
                host: refused.host.clone(),
                addr: refused.addr,
            };
        }
        if let Some(OutboundError::Unresolvable(host)) = cause.downcast_ref::<OutboundError>() {
            return OutboundError::Unresolvable(host.clone());
        }
        source = cause.source();
    }
    if err.is_timeout() {
        OutboundError::Timeout(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX))
    } else {
        // The innermost cause says what happened ("connection reset", "connection closed
        // before message completed"); reqwest's own message does not.
        let mut cause: &(dyn StdError + 'static) = &err;
        while let Some(next) = cause.source() {
            cause = next;
        }
        if err.is_connect() {
            OutboundError::Connect(format!("{}: {cause}", url.host_str().unwrap_or_default()))
        } else {
            let cause = cause.to_string();
            let err = err.without_url();
            if cause == err.to_string() {
                OutboundError::Request(cause)
            } else {
                OutboundError::Request(format!("{err}: {cause}"))
            }
        }
    }
}

/// The signature header value over `body`: `sha256=` and the lowercase hex HMAC-SHA256 digest
/// keyed by `secret`.
pub fn sign_sha256(secret: &[u8], body: &[u8]) -> String {
    // HMAC accepts keys of any length.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!());
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "127.8.9.10",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "255.255.255.255",
            "224.0.0.1",
            "192.0.2.1",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "2001:db8::1",
        ] {
            assert!(!is_public(ip(private)), "{private} must be refused");
        }
        for public in [
            "93.184.215.14",
            "8.8.8.8",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
        ] {
            assert!(is_public(ip(public)), "{public} must be allowed");
        }
    }

    #[tokio::test]
    async fn urls_are_checked_by_scheme_and_address() {
        let strict = Outbound::new(AddressPolicy::default()).unwrap();
        assert!(matches!(
            strict.check_url("http://93.184.215.14/hook").await,
            Err(OutboundError::SchemeNotAllowed)
        ));
        assert!(strict.check_url("https://93.184.215.14/hook").await.is_ok());
        for refused in [
            "https://127.0.0.1/hook",
            "https://[::1]:8443/hook",
            "https://10.0.0.7/hook",
            "https://localhost/hook",
            "https://[::ffff:192.168.0.1]/",
        ] {
            assert!(
                matches!(
                    strict.check_url(refused).await,
                    Err(OutboundError::AddressRefused { .. })
                ),
                "{refused}"
            );
        }
        assert!(matches!(
            strict.check_url("not a url").await,
            Err(OutboundError::InvalidUrl(_))
        ));
        let open = Outbound::new(AddressPolicy {
            allow_private: true,
        })
        .unwrap();
        assert!(open.check_url("http://127.0.0.1:9/hook").await.is_ok());
        assert!(open.check_url("http://localhost:9/hook").await.is_ok());
    }

    #[tokio::test]
    async fn sending_is_refused_at_connect_time() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let strict = Outbound::new(AddressPolicy::default()).unwrap();
        // A name (resolved by the policy resolver) and a literal (checked before sending).
        for target in [
            format!("https://localhost:{port}/"),
            format!("https://127.0.0.1:{port}/"),
        ] {
            let url = Url::parse(&target).unwrap();
            let err = strict
                .post_json(&url, &[], b"{}".to_vec(), Duration::from_secs(2))
                .await
                .unwrap_err();
            assert_eq!(err.code(), FailureCode::AddressRefused, "{target}: {err}");
        }
    }

    #[test]
    fn signatures_are_lowercase_hex_hmac_sha256() {
        // RFC 4231 test case 2.
        assert_eq!(
            sign_sha256(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
