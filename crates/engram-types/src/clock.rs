//! The time source, injectable so tests and crash scenarios control it, and the one type every
//! stored time has.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A moment as Unix milliseconds (UTC): the unit of every stored time, lease and expiry. A type of
/// its own so a time is never mixed up with a count, a duration or another unit; arithmetic on it
/// saturates at the ends of the range.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct UnixMs(i64);

impl UnixMs {
    /// The Unix epoch.
    pub const EPOCH: Self = Self(0);
    /// The latest moment the type holds (a time that never comes).
    pub const MAX: Self = Self(i64::MAX);

    pub const fn from_millis(ms: i64) -> Self {
        Self(ms)
    }

    /// The moment as Unix milliseconds (what the stores keep).
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// The moment `duration` after this one.
    #[must_use]
    pub fn after(self, duration: Duration) -> Self {
        Self(self.0.saturating_add(millis(duration)))
    }

    /// The moment `duration` before this one.
    #[must_use]
    pub fn before(self, duration: Duration) -> Self {
        Self(self.0.saturating_sub(millis(duration)))
    }

    /// The time from `earlier` to this moment; zero when `earlier` is later.
    pub fn since(self, earlier: Self) -> Duration {
        let ms = self.0.saturating_sub(earlier.0).max(0);
        Duration::from_millis(u64::try_from(ms).unwrap_or(0))
    }

    /// RFC 3339 in UTC; empty for a moment out of the calendar's range.
    pub fn rfc3339(self) -> String {
        let nanos = i128::from(self.0) * 1_000_000;
        time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
            .ok()
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
            .unwrap_or_default()
    }
}

impl fmt::Display for UnixMs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rfc3339())
    }
}

#[cfg(feature = "sqlx")]
mod column {
    //! A moment is stored as a 64-bit integer column on every backend.
    use super::UnixMs;
    use sqlx::encode::IsNull;
    use sqlx::error::BoxDynError;
    use sqlx::{Database, Decode, Encode, Type};

    impl<DB: Database> Type<DB> for UnixMs
    where
        i64: Type<DB>,
    {
        fn type_info() -> DB::TypeInfo {
            <i64 as Type<DB>>::type_info()
        }

        fn compatible(ty: &DB::TypeInfo) -> bool {
            <i64 as Type<DB>>::compatible(ty)
        }
    }

    impl<'q, DB: Database> Encode<'q, DB> for UnixMs
    where
        i64: Encode<'q, DB>,
    {
        fn encode_by_ref(
            &self,
            buf: &mut <DB as Database>::ArgumentBuffer<'q>,
        ) -> Result<IsNull, BoxDynError> {
            <i64 as Encode<'q, DB>>::encode_by_ref(&self.0, buf)
        }
    }

    impl<'r, DB: Database> Decode<'r, DB> for UnixMs
    where
        i64: Decode<'r, DB>,
    {
        fn decode(value: <DB as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
            <i64 as Decode<'r, DB>>::decode(value).map(UnixMs)
        }
    }
}

/// A clock.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> UnixMs;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> UnixMs {
        UnixMs(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, millis),
        )
    }
}

/// The system's wall clock moved by an offset: set to another clock's distance from this
/// machine's (PostgreSQL's, shared by instances on several machines), so that every instance
/// takes its times from one base whatever their own clocks say.
#[derive(Debug, Default)]
pub struct OffsetClock {
    offset_ms: std::sync::atomic::AtomicI64,
}

impl OffsetClock {
    /// How far the clock is from the system's (ms; positive: ahead).
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn set_offset_ms(&self, offset_ms: i64) {
        self.offset_ms
            .store(offset_ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// The offset that makes this clock read `other`, read as the system's clock went from
    /// `sent` to `received`: `other` is taken to be the midpoint's.
    pub fn offset_to(other: UnixMs, sent: UnixMs, received: UnixMs) -> i64 {
        let (sent, received) = (sent.as_millis(), received.as_millis());
        let midpoint = sent.saturating_add(received.saturating_sub(sent) / 2);
        other.as_millis().saturating_sub(midpoint)
    }
}

impl Clock for OffsetClock {
    fn now(&self) -> UnixMs {
        UnixMs::from_millis(
            SystemClock
                .now()
                .as_millis()
                .saturating_add(self.offset_ms()),
        )
    }
}

/// A duration in milliseconds, saturating (leases and backoffs are given to the stores so).
pub fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// Formats a moment as RFC 3339 (UTC); empty for a time out of range.
pub fn format_ms(at: UnixMs) -> String {
    at.rfc3339()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_and_formats() {
        let t = UnixMs::from_millis(1_000);
        assert_eq!(t.after(Duration::from_secs(1)).as_millis(), 2_000);
        assert_eq!(t.before(Duration::from_secs(2)).as_millis(), -1_000);
        assert_eq!(UnixMs::MAX.after(Duration::from_secs(1)), UnixMs::MAX);
        assert_eq!(t.since(UnixMs::EPOCH), Duration::from_secs(1));
        assert_eq!(UnixMs::EPOCH.since(t), Duration::ZERO);
        assert_eq!(UnixMs::EPOCH.rfc3339(), "1970-01-01T00:00:00Z");
        assert_eq!(UnixMs::MAX.rfc3339(), "");
        assert_eq!(serde_json::to_string(&t).unwrap(), "1000");
    }
}
