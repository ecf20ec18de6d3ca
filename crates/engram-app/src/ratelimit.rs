//! Per-key request rate limit: a token bucket per API key (GCRA). One instance on the embedded
//! store keeps the buckets in memory (`governor`); instances sharing a PostgreSQL store keep them
//! there, one statement per request, so a key's budget holds across instances.

use std::num::NonZeroU32;
use std::sync::Arc;

use engram_config::RateLimitConfig;
use engram_store::{RateRule, Store};
use engram_types::{ApiKeyPrefix, UnixMs};
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::{AppError, AppResult};

pub(crate) enum RateLimiter {
    Off,
    /// Buckets in this process.
    Local(DefaultKeyedRateLimiter<ApiKeyPrefix>),
    /// Buckets in the store every instance shares.
    Shared {
        store: Arc<dyn Store>,
        rule: RateRule,
    },
}

impl RateLimiter {
    /// Buckets in this process.
    pub(crate) fn local(config: &RateLimitConfig) -> Self {
        let quota = NonZeroU32::new(config.requests_per_second)
            .zip(NonZeroU32::new(config.burst))
            .map(|(rate, burst)| Quota::per_second(rate).allow_burst(burst));
        match quota.filter(|_| config.enabled) {
            Some(quota) => Self::Local(DefaultKeyedRateLimiter::keyed(quota)),
            None => Self::Off,
        }
    }

    /// Buckets in `store`, shared by every instance on it.
    pub(crate) fn shared(config: &RateLimitConfig, store: Arc<dyn Store>) -> Self {
        if !config.enabled {
            return Self::Off;
        }
        Self::Shared {
            store,
            rule: RateRule {
                per_second: config.requests_per_second,
                burst: config.burst,
            },
        }
    }

    /// Takes one request from the key's bucket at `now`.
    pub(crate) async fn check(&self, key: &ApiKeyPrefix, now: UnixMs) -> AppResult<()> {
        let wait_us = match self {
            Self::Off => None,
            Self::Local(limiter) => {
                let refused = limiter.check_key(key).err().map(|not_until| {
                    let wait = not_until.wait_time_from(DefaultClock::default().now());
                    i64::try_from(wait.as_micros()).unwrap_or(i64::MAX)
                });
                if limiter.len() > 100_000 {
                    limiter.retain_recent();
                }
                refused
            }
            Self::Shared { store, rule } => {
                store
                    .take_request(key, *rule, now.as_millis().saturating_mul(1_000))
                    .await?
            }
        };
        match wait_us {
            None => Ok(()),
            Some(us) => Err(AppError::RateLimited {
                // Whole seconds, rounded up, at least one.
                retry_after_secs: u64::try_from(us.saturating_add(999_999) / 1_000_000)
                    .unwrap_or(1)
                    .max(1),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(enabled: bool, rate: u32, burst: u32) -> RateLimitConfig {
        RateLimitConfig {
            enabled,
            requests_per_second: rate,
            burst,
        }
    }

    async fn past_the_burst_requests_wait(limiter: RateLimiter) {
        let a = ApiKeyPrefix::from_trusted("a");
        let b = ApiKeyPrefix::from_trusted("b");
        for _ in 0..3 {
            limiter.check(&a, UnixMs::from_millis(1_000)).await.unwrap();
        }
        match limiter.check(&a, UnixMs::from_millis(1_000)).await {
            Err(AppError::RateLimited { retry_after_secs }) => assert_eq!(retry_after_secs, 1),
            other => panic!("expected a rate limit, got {other:?}"),
        }
        limiter
            .check(&b, UnixMs::from_millis(1_000))
            .await
            .expect("each key has its own bucket");
    }

    #[tokio::test]
    async fn past_the_burst_requests_wait_in_process() {
        past_the_burst_requests_wait(RateLimiter::local(&config(true, 1, 3))).await;
    }

    #[tokio::test]
    async fn past_the_burst_requests_wait_in_the_store() {
        let temp = engram_testkit::TempStore::new().await;
        let store: Arc<dyn Store> = temp.store.clone();
        past_the_burst_requests_wait(RateLimiter::shared(&config(true, 1, 3), store)).await;
    }

    #[tokio::test]
    async fn disabled_never_limits() {
        let temp = engram_testkit::TempStore::new().await;
        let off = config(false, 1, 1);
        for limiter in [
            RateLimiter::local(&off),
            RateLimiter::shared(&off, temp.store.clone()),
        ] {
            let a = ApiKeyPrefix::from_trusted("a");
            for _ in 0..100 {
                limiter.check(&a, UnixMs::from_millis(1_000)).await.unwrap();
            }
        }
    }
}
