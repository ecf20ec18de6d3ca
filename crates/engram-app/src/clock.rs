//! Time formatting for the application.

pub use engram_types::{Clock, SystemClock};

/// Formats Unix milliseconds as RFC 3339 (UTC).
pub fn format_ms(ms: i64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}
