//! Per-key request rate limit: a token bucket per API key (GCRA, from `governor`).

use std::num::NonZeroU32;

use engram_config::RateLimitConfig;
use engram_types::ApiKeyPrefix;
use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::{AppError, AppResult};

pub(crate) struct RateLimiter {
    limiter: Option<DefaultKeyedRateLimiter<ApiKeyPrefix>>,
}

impl RateLimiter {
    pub(crate) fn new(config: &RateLimitConfig) -> Self {
        let quota = NonZeroU32::new(config.requests_per_second)
            .zip(NonZeroU32::new(config.burst))
            .map(|(rate, burst)| Quota::per_second(rate).allow_burst(burst));
        Self {
            limiter: quota
                .filter(|_| config.enabled)
                .map(DefaultKeyedRateLimiter::keyed),
        }
    }

    /// Takes one request from the key's bucket.
    pub(crate) fn check(&self, key: &ApiKeyPrefix) -> AppResult<()> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        limiter.check_key(key).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            let retry_after_secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            AppError::RateLimited {
                retry_after_secs: retry_after_secs.max(1),
            }
        })?;
        if limiter.len() > 100_000 {
            limiter.retain_recent();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_burst_requests_wait() {
        let limiter = RateLimiter::new(&RateLimitConfig {
            enabled: true,
            requests_per_second: 1,
            burst: 3,
        });
        let a = ApiKeyPrefix::from_trusted("a");
        let b = ApiKeyPrefix::from_trusted("b");
        for _ in 0..3 {
            limiter.check(&a).unwrap();
        }
        match limiter.check(&a) {
            Err(AppError::RateLimited { retry_after_secs }) => assert_eq!(retry_after_secs, 1),
            other => panic!("expected a rate limit, got {other:?}"),
        }
        limiter.check(&b).expect("each key has its own bucket");
    }

    #[test]
    fn disabled_never_limits() {
        let limiter = RateLimiter::new(&RateLimitConfig {
            enabled: false,
            requests_per_second: 1,
            burst: 1,
        });
        let a = ApiKeyPrefix::from_trusted("a");
        for _ in 0..100 {
            limiter.check(&a).unwrap();
        }
    }
}
