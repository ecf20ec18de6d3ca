//! Capped exponential backoff with optional jitter: the one schedule of every persisted retry
//! (indexing jobs, webhook deliveries). Retries are rows in the store, not loops in memory, so
//! only the delay of the next attempt is computed here.

use std::time::Duration;

/// A retry schedule: `base`, `2·base`, `4·base`, … up to `max`, each delay spread by `jitter`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
    /// Fraction (0..=1) of each delay that is randomised: the delay becomes
    /// `d·(1 - jitter) + d·jitter·r` for `r` uniform in `[0, 1)`.
    pub jitter: f64,
}

impl Backoff {
    /// The delay after `attempts` failed attempts (1 = the first failure). `random` is a
    /// uniform sample in `[0, 1)`; it is ignored when `jitter` is 0.
    pub fn delay(&self, attempts: u32, random: f64) -> Duration {
        let factor = 1_u32
            .checked_shl(attempts.saturating_sub(1))
            .unwrap_or(u32::MAX);
        let capped = self.base.saturating_mul(factor).min(self.max);
        let jitter = self.jitter.clamp(0.0, 1.0);
        if jitter == 0.0 {
            return capped;
        }
        let spread = capped.mul_f64(jitter);
        (capped - spread) + spread.mul_f64(random.clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn doubles_up_to_the_cap() {
        let b = Backoff {
            base: ms(1_000),
            max: ms(10_000),
            jitter: 0.0,
        };
        let delays: Vec<Duration> = (1..=6).map(|n| b.delay(n, 0.5)).collect();
        assert_eq!(delays, [1_000, 2_000, 4_000, 8_000, 10_000, 10_000].map(ms));
        assert_eq!(b.delay(u32::MAX, 0.5), ms(10_000));
        assert_eq!(b.delay(0, 0.5), ms(1_000));
    }

    #[test]
    fn jitter_stays_within_its_fraction() {
        let b = Backoff {
            base: ms(1_000),
            max: ms(60_000),
            jitter: 0.2,
        };
        assert_eq!(b.delay(3, 0.0).as_millis(), 3_200);
        assert_eq!(b.delay(3, 0.999_999).as_millis(), 3_999);
        assert!((ms(3_200)..=ms(4_000)).contains(&b.delay(3, 0.5)));
    }
}
