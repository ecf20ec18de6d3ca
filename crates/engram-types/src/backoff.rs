//! Capped exponential backoff with optional jitter: the one schedule of every persisted retry
//! (indexing jobs, webhook deliveries). Retries are rows in the store, not loops in memory, so
//! only the delay of the next attempt is computed here.

/// A retry schedule: `base`, `2·base`, `4·base`, … up to `max`, each delay spread by `jitter`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub base_ms: i64,
    pub max_ms: i64,
    /// Fraction (0..=1) of each delay that is randomised: the delay becomes
    /// `d·(1 - jitter) + d·jitter·r` for `r` uniform in `[0, 1)`.
    pub jitter: f64,
}

impl Backoff {
    /// The delay after `attempts` failed attempts (1 = the first failure). `random` is a
    /// uniform sample in `[0, 1)`; it is ignored when `jitter` is 0.
    pub fn delay_ms(&self, attempts: u32, random: f64) -> i64 {
        let exponent = attempts.saturating_sub(1).min(40);
        let capped = self
            .base_ms
            .max(0)
            .saturating_mul(1_i64 << exponent)
            .min(self.max_ms.max(0));
        let jitter = self.jitter.clamp(0.0, 1.0);
        if jitter == 0.0 {
            return capped;
        }
        let spread = capped as f64 * jitter;
        (capped as f64 - spread + spread * random.clamp(0.0, 1.0)).round() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap() {
        let b = Backoff {
            base_ms: 1_000,
            max_ms: 10_000,
            jitter: 0.0,
        };
        let delays: Vec<i64> = (1..=6).map(|n| b.delay_ms(n, 0.5)).collect();
        assert_eq!(delays, [1_000, 2_000, 4_000, 8_000, 10_000, 10_000]);
        assert_eq!(b.delay_ms(u32::MAX, 0.5), 10_000);
        assert_eq!(b.delay_ms(0, 0.5), 1_000);
    }

    #[test]
    fn jitter_stays_within_its_fraction() {
        let b = Backoff {
            base_ms: 1_000,
            max_ms: 60_000,
            jitter: 0.2,
        };
        assert_eq!(b.delay_ms(3, 0.0), 3_200);
        assert_eq!(b.delay_ms(3, 0.999_999), 4_000);
        assert!((3_200..=4_000).contains(&b.delay_ms(3, 0.5)));
    }
}
