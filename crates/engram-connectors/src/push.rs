//! Push: events a provider delivers to engram's public route for a connector
//! (`POST /connectors/{id}/events`), verified by the provider's own signature scheme before
//! anything is done. A verified event asks for a sync of the connector, which reads what changed
//! from the provider's change cursor as a scheduled sync does: one path for both, and a missed
//! or replayed event costs at most an incremental pass. Replays are refused by delivery id (the
//! app keeps the ids it saw for a day) and, where the provider signs a time, by age.

use serde_json::{Map, Value};

/// The signing secret a connector's credentials hold for its provider's webhook.
pub const SECRET_FIELD: &str = "webhook_secret";

/// An event as it reached engram.
#[derive(Debug, Clone, Copy)]
pub struct PushRequest<'a> {
    /// The request's headers, names lowercased.
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    pub now_unix: i64,
}

impl<'a> PushRequest<'a> {
    /// The first value of the header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&'a str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }
}

/// A verified event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushEvent {
    /// The provider's id of this delivery (a redelivery repeats it).
    pub delivery_id: String,
    /// The provider's name of the event (`push`, `issues`, `Issue`).
    pub event: String,
    /// The event only confirms the endpoint (GitHub's `ping`): nothing to sync.
    pub ping: bool,
}

/// Why an event is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    /// Not signed with the connector's secret (or the connector has none).
    #[error("{0}")]
    Unsigned(String),
    /// Signed, but older than the provider's window: a replay.
    #[error("{0}")]
    Stale(String),
    /// Not an event of this provider.
    #[error("{0}")]
    Malformed(String),
}

/// The connector's webhook secret.
pub(crate) fn secret<'a>(
    credentials: &'a Map<String, Value>,
    provider: &str,
) -> Result<&'a str, PushError> {
    credentials
        .get(SECRET_FIELD)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            PushError::Unsigned(format!(
                "the connector has no `{SECRET_FIELD}`: give the same secret to the {provider} \
                 webhook and to the connector's credentials"
            ))
        })
}

/// Whether `signature_hex` is the HMAC-SHA256 of `body` under `secret` (compared in constant
/// time).
pub(crate) fn hmac_sha256_matches(secret: &str, body: &[u8], signature_hex: &str) -> bool {
    let Ok(signature) = hex::decode(signature_hex.trim()) else {
        return false;
    };
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    ring::hmac::verify(&key, body, &signature).is_ok()
}

/// Whether `given` equals `expected`, compared in constant time (both HMACed under a fixed key,
/// the tags compared by `ring`).
pub fn same_secret(expected: &str, given: &str) -> bool {
    const KEY: &str = "engram secret comparison";
    let tag = hmac_sha256_hex(KEY, expected.as_bytes());
    hmac_sha256_matches(KEY, given.as_bytes(), &tag)
}

/// The hex HMAC-SHA256 of `body` under `secret` (for tests and fakes).
pub fn hmac_sha256_hex(secret: &str, body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    hex::encode(ring::hmac::sign(&key, body).as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_verify_only_with_the_secret_and_the_exact_body() {
        let signed = hmac_sha256_hex("s3cret", b"{\"a\":1}");
        assert!(hmac_sha256_matches("s3cret", b"{\"a\":1}", &signed));
        assert!(!hmac_sha256_matches("other", b"{\"a\":1}", &signed));
        assert!(!hmac_sha256_matches("s3cret", b"{\"a\":2}", &signed));
        assert!(!hmac_sha256_matches("s3cret", b"{\"a\":1}", "zz"));
        assert!(!hmac_sha256_matches("s3cret", b"{\"a\":1}", ""));
    }

    #[test]
    fn secrets_are_the_same_only_when_equal() {
        assert!(same_secret(
            "secret_abcdefghijklmnop",
            "secret_abcdefghijklmnop"
        ));
        assert!(!same_secret(
            "secret_abcdefghijklmnop",
            "secret_abcdefghijklmnoq"
        ));
        assert!(!same_secret("secret_abcdefghijklmnop", ""));
    }
}
