//! What the hosted-SaaS providers (GitHub, Notion, Linear, Confluence, Jira, Slack) share in
//! reading their APIs: strings of an answer, waiting out a rate limit and the error of one not
//! waited out, a request that got no answer, and a failure that concerns one object only.

use std::time::Duration;

use serde_json::Value;

use crate::{rfc3339, ProviderError};

/// The string at `pointer` in an answer; empty when absent or not a string.
pub(crate) fn text_of<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The wait a `Retry-After` header asks for (whole seconds), when it is one.
pub(crate) fn retry_after(header: Option<&str>) -> Option<Duration> {
    header
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// A backoff of 1, 2, 4… seconds by attempt (at most 64).
pub(crate) fn backoff(attempt: u32) -> Duration {
    Duration::from_secs(1_u64 << attempt.min(6))
}

/// How long to wait before trying a rate-limited request again: the answer's `Retry-After`
/// (whole seconds) when it carried it, else a [`backoff`] by attempt.
pub(crate) fn retry_wait(header: Option<&str>, attempt: u32) -> Duration {
    retry_after(header).unwrap_or_else(|| backoff(attempt))
}

/// Waits out a rate limit in place when its `wait` is at most `wait_max` and fewer than
/// `retries` waits were done (`attempt`, counted here): `true` to try again, `false` when the
/// request should give up instead ([`rate_limit_error`]).
pub(crate) async fn waited_out(
    wait: Duration,
    attempt: &mut u32,
    wait_max: Duration,
    retries: u32,
) -> bool {
    if wait > wait_max || *attempt >= retries {
        return false;
    }
    tokio::time::sleep(wait).await;
    *attempt += 1;
    true
}

/// The error of a rate limit not waited out (`429`): `said` (who limits whom, and why), then
/// when engram tries again, `wait` (at least a second) after `now`.
pub(crate) fn rate_limit_error(said: &str, wait: Duration, now: i64) -> ProviderError {
    let secs = i64::try_from(wait.as_secs()).unwrap_or(i64::MAX / 2).max(1);
    let until = now.saturating_add(secs);
    ProviderError::RateLimited {
        message: format!(
            "{said}; engram tries again after {} (in about {secs} s)",
            rfc3339(until)
        ),
        http_status: 429,
        until_unix: until,
    }
}

/// A request to `source` (`Slack`, `GitHub`) that got no answer (`error`): worth retrying;
/// `what` names the request in words.
pub(crate) fn unanswered(source: &str, what: &str, error: impl std::fmt::Display) -> ProviderError {
    ProviderError::Transient {
        message: format!("{source} ({what}): {error}"),
        http_status: 0,
    }
}

/// `source`'s answer to `what` (its HTTP status `status`) that is not the JSON it should be:
/// worth retrying.
pub(crate) fn not_json(
    source: &str,
    what: &str,
    status: u16,
    error: impl std::fmt::Display,
) -> ProviderError {
    ProviderError::Transient {
        message: format!("{source}'s answer to {what} is not JSON: {error}"),
        http_status: status,
    }
}

/// A failure reading one object's content: a rate limit stops the pass (waiting is what helps);
/// anything else concerns this object alone.
pub(crate) fn object_failure(error: ProviderError) -> ProviderError {
    match error {
        ProviderError::Object(_) | ProviderError::RateLimited { .. } => error,
        ProviderError::Unauthorized { .. }
        | ProviderError::Resource { .. }
        | ProviderError::Transient { .. }
        | ProviderError::Invalid(_) => ProviderError::Object(error.to_string()),
    }
}

/// The pass in progress as a provider saved it (`Position::within`).
pub(crate) fn saved_pass<T: serde::de::DeserializeOwned>(within: &str) -> Result<T, ProviderError> {
    serde_json::from_str(within)
        .map_err(|e| ProviderError::Invalid(format!("the saved pass cannot be read: {e}")))
}

/// The source's own id in a resource id `<prefix><id>` (the prefix may be left out): 1 to `max`
/// characters, each one `allowed` takes; otherwise `Invalid`, saying the id is not `expected`.
pub(crate) fn prefixed_id<'a>(
    resource: &'a crate::ResourceRef,
    prefix: &str,
    max: usize,
    allowed: fn(char) -> bool,
    expected: &str,
) -> Result<&'a str, ProviderError> {
    let id = resource.id.as_str();
    let bare = id.strip_prefix(prefix).unwrap_or(id);
    if bare.is_empty() || bare.len() > max || !bare.chars().all(allowed) {
        return Err(ProviderError::Invalid(format!("`{id}` is not {expected}")));
    }
    Ok(bare)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefixed_id_is_its_bare_id_checked() {
        let resource = |id: &str| crate::ResourceRef {
            id: id.to_owned(),
            resource_type: String::new(),
            filters: serde_json::Value::Null,
            provider_metadata: serde_json::Value::Null,
        };
        let digits = |c: char| c.is_ascii_digit();
        let expected = "`space:` and a space id";
        for (id, bare) in [("space:42", "42"), ("42", "42")] {
            assert_eq!(
                prefixed_id(&resource(id), "space:", 3, digits, expected).ok(),
                Some(bare)
            );
        }
        for id in ["space:", "space:4a", "space:1234"] {
            let refused = prefixed_id(&resource(id), "space:", 3, digits, expected).unwrap_err();
            assert_eq!(
                refused,
                ProviderError::Invalid(format!("`{id}` is not {expected}"))
            );
        }
    }
}
