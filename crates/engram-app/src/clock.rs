//! Time for the application: the machine's clock, or on a store shared by instances on several
//! machines (PostgreSQL), the store's clock, so that leases, expiries and schedules have one time
//! base whatever each machine's clock says.

use std::sync::Arc;
use std::time::Duration;

pub use engram_types::clock::{format_ms, OffsetClock};
pub use engram_types::{Clock, SystemClock, UnixMs};

use engram_store::Store;
use tokio_util::sync::CancellationToken;

/// How often an instance measures its distance to the store's clock again (clocks drift, and
/// NTP steps them).
const RESYNC: Duration = Duration::from_secs(30);
/// A distance past which the log says that this machine's clock is off.
const WARN_OFF_MS: i64 = 1_000;
/// Readings per measurement; the one with the shortest round trip is kept (the least
/// uncertain midpoint).
const READINGS: usize = 3;
/// A round trip past which a reading says little (a wait for a pooled connection counts in it):
/// a resync keeps the distance it had rather than take it.
const SLOW_READING_MS: i64 = 500;

/// This machine's distance to the store's clock (ms, positive: the store's is ahead) and the
/// round trip of the reading it comes from, the one with the shortest; `None` when the store has
/// no clock of its own.
pub(crate) async fn store_offset(
    store: &dyn Store,
) -> engram_store::StoreResult<Option<(i64, i64)>> {
    let mut best: Option<(i64, i64)> = None;
    for _ in 0..READINGS {
        let sent = SystemClock.now();
        let Some(theirs) = store.clock().await? else {
            return Ok(None);
        };
        let received = SystemClock.now();
        let round_trip = received.as_millis().saturating_sub(sent.as_millis());
        let offset = OffsetClock::offset_to(theirs, sent, received);
        if best.is_none_or(|(trip, _)| round_trip < trip) {
            best = Some((round_trip, offset));
        }
    }
    Ok(best.map(|(trip, offset)| (offset, trip)))
}

/// The application's clock for `store`: the store's clock where it has one (measured now), the
/// machine's otherwise; with the offset clock to keep in step ([`keep_in_step`]).
pub(crate) async fn for_store(
    store: &dyn Store,
) -> engram_store::StoreResult<(Arc<dyn Clock>, Option<Arc<OffsetClock>>)> {
    let Some((offset, _)) = store_offset(store).await? else {
        return Ok((Arc::new(SystemClock), None));
    };
    let clock = Arc::new(OffsetClock::default());
    clock.set_offset_ms(offset);
    if offset.abs() > WARN_OFF_MS {
        tracing::warn!(
            offset_ms = offset,
            "this machine's clock is off PostgreSQL's; engram takes its times from PostgreSQL's"
        );
    }
    Ok((clock.clone(), Some(clock)))
}

/// Measures the distance to the store's clock every [`RESYNC`] until `token` is cancelled.
pub(crate) async fn keep_in_step(
    store: Arc<dyn Store>,
    clock: Arc<OffsetClock>,
    token: CancellationToken,
) {
    loop {
        tokio::select! {
            () = token.cancelled() => return,
            () = tokio::time::sleep(RESYNC) => {}
        }
        match store_offset(store.as_ref()).await {
            Ok(Some((_, trip))) if trip > SLOW_READING_MS => {
                tracing::debug!(
                    round_trip_ms = trip,
                    "a slow reading of the store's clock: kept the distance"
                );
            }
            Ok(Some((offset, _))) => {
                if (offset - clock.offset_ms()).abs() > WARN_OFF_MS {
                    tracing::warn!(
                        from_ms = clock.offset_ms(),
                        to_ms = offset,
                        "this machine's clock moved against PostgreSQL's"
                    );
                }
                clock.set_offset_ms(offset);
            }
            Ok(None) => return,
            // The store is away: the last distance holds until it is back.
            Err(err) => tracing::debug!(error = %err, "reading the store's clock failed"),
        }
    }
}
