//! The byte budget for postings lists held by queries in flight, so that a replica's memory
//! is bounded by its configuration and not by its load: at most the cache's capacity, plus
//! this budget, plus a fixed overhead (threads, allocator, the term directory).
//!
//! Before a query runs, it reserves the stored bytes of every list it will hold (hits and
//! misses alike: a cached list pinned by a query stays in memory even if it is evicted
//! meanwhile) plus its largest list once more, for the read buffer of a miss (a query reads
//! its lists one at a time, and a buffer lives only until its list is decoded). The
//! reservation is released when the query has dropped its lists. In memory a list takes its
//! stored bytes plus its skip table (at most ~10%, see [`crate::postings`]).
//!
//! Beyond the budget a query **waits briefly, then is shed**: it queues (first come, first
//! served, so a large query is not starved by small ones) for at most the configured wait,
//! holding no thread and no memory, and gets 503 with a JSON error if the bytes did not
//! free up in time. A short wait absorbs bursts, where shedding at once would refuse
//! queries that a few milliseconds later would fit; a bounded one keeps a slow replica from
//! queueing without limit, and a balancer retries a 503 on another replica. A query that
//! needs more than the whole budget can never run and is refused at once.
//!
//! The budget is a tokio [`Semaphore`] whose permits are KiB, so one query may reserve up to
//! 4 TiB (`acquire_many` takes a `u32`).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Default budget: 256 MiB. Reservations are conservative (hits count in full although the
/// cache holds them too), so the budget should cover several large queries at once: the
/// largest queries of the synthetic default log on its N = 10M index reserve tens of MB
/// each (`replica_inflight_bytes_peak` shows what a deployment reaches).
pub const DEFAULT_INFLIGHT_BYTES: u64 = 256 << 20;

/// Default longest wait for the budget: 100 ms.
pub const DEFAULT_WAIT_MS: u64 = 100;

/// Bytes per permit.
const UNIT: u64 = 1024;

/// Why a query was not admitted (HTTP 503).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OverBudget {
    /// The budget did not free up within the wait.
    #[error(
        "overloaded: this query's postings need {need} bytes and queries in flight hold \
         {held} of the {limit}-byte budget (--inflight-bytes); retry later or elsewhere"
    )]
    Busy {
        /// Bytes the query asked for.
        need: u64,
        /// Bytes held when it gave up.
        held: u64,
        /// The budget.
        limit: u64,
    },
    /// The query alone needs more than the whole budget.
    #[error(
        "this query's postings need {need} bytes, more than the whole in-flight budget of \
         {limit} bytes (--inflight-bytes)"
    )]
    TooLarge {
        /// Bytes the query asked for.
        need: u64,
        /// The budget.
        limit: u64,
    },
}

/// The shared budget.
#[derive(Debug)]
pub struct InflightBudget {
    permits: Arc<Semaphore>,
    /// The budget in whole permits.
    units: u64,
    wait: Duration,
    peak: AtomicU64,
}

/// Bytes reserved by one query; released on drop.
#[derive(Debug)]
pub struct Reservation {
    _permit: Option<OwnedSemaphorePermit>,
    bytes: u64,
}

impl Reservation {
    /// The bytes reserved (rounded up to whole KiB).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl InflightBudget {
    /// A budget of `limit` bytes (rounded down to whole KiB) that queries wait for at most
    /// `wait`.
    pub fn new(limit: u64, wait: Duration) -> Self {
        let units = (limit / UNIT).min(Semaphore::MAX_PERMITS as u64);
        InflightBudget {
            permits: Arc::new(Semaphore::new(units as usize)),
            units,
            wait,
            peak: AtomicU64::new(0),
        }
    }

    /// The budget in bytes.
    pub fn limit(&self) -> u64 {
        self.units * UNIT
    }

    /// Bytes reserved by queries in flight now.
    pub fn held(&self) -> u64 {
        (self.units - self.permits.available_permits() as u64) * UNIT
    }

    /// The most bytes ever reserved at once (as seen by each reservation when granted).
    pub fn peak(&self) -> u64 {
        self.peak.load(Relaxed)
    }

    /// Reserves `need` bytes, waiting up to the configured wait for them to free up.
    pub async fn reserve(&self, need: u64) -> Result<Reservation, OverBudget> {
        let units = need.div_ceil(UNIT);
        if units == 0 {
            return Ok(Reservation {
                _permit: None,
                bytes: 0,
            });
        }
        let too_large = OverBudget::TooLarge {
            need,
            limit: self.limit(),
        };
        let Ok(n) = u32::try_from(units) else {
            return Err(too_large);
        };
        if units > self.units {
            return Err(too_large);
        }
        let busy = || OverBudget::Busy {
            need,
            held: self.held(),
            limit: self.limit(),
        };
        let permit = match self.permits.clone().try_acquire_many_owned(n) {
            Ok(p) => p,
            Err(_) if self.wait.is_zero() => return Err(busy()),
            Err(_) => {
                match tokio::time::timeout(self.wait, self.permits.clone().acquire_many_owned(n))
                    .await
                {
                    Ok(Ok(p)) => p,
                    // Timed out (the semaphore is never closed).
                    _ => return Err(busy()),
                }
            }
        };
        self.peak.fetch_max(self.held(), Relaxed);
        Ok(Reservation {
            _permit: Some(permit),
            bytes: units * UNIT,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn reserves_up_to_the_limit_and_releases_on_drop() {
        run(async {
            let b = InflightBudget::new(10 * UNIT, Duration::ZERO);
            let a = b.reserve(6 * UNIT).await.unwrap();
            assert_eq!((b.held(), a.bytes()), (6 * UNIT, 6 * UNIT));
            // Rounded up to whole KiB: 4 KiB + 1 byte needs 5 KiB, which is not free.
            let err = b.reserve(4 * UNIT + 1).await.unwrap_err();
            assert_eq!(
                err,
                OverBudget::Busy {
                    need: 4 * UNIT + 1,
                    held: 6 * UNIT,
                    limit: 10 * UNIT
                }
            );
            let c = b.reserve(4 * UNIT).await.unwrap();
            assert_eq!((b.held(), b.peak()), (10 * UNIT, 10 * UNIT));
            drop(a);
            drop(c);
            assert_eq!((b.held(), b.peak()), (0, 10 * UNIT));
            assert_eq!(b.reserve(0).await.unwrap().bytes(), 0);
            assert!(matches!(
                b.reserve(11 * UNIT).await,
                Err(OverBudget::TooLarge { .. })
            ));
            assert!(matches!(
                b.reserve(u64::MAX).await,
                Err(OverBudget::TooLarge { .. })
            ));
        });
    }

    #[test]
    fn a_waiting_query_gets_the_bytes_released_within_its_wait() {
        run(async {
            let b = Arc::new(InflightBudget::new(10 * UNIT, Duration::from_secs(20)));
            let first = b.reserve(8 * UNIT).await.unwrap();
            let waiter = {
                let b = b.clone();
                tokio::spawn(async move { b.reserve(5 * UNIT).await.map(|r| r.bytes()) })
            };
            // Let the waiter queue, then free the bytes it waits for.
            tokio::task::yield_now().await;
            drop(first);
            assert_eq!(waiter.await.unwrap(), Ok(5 * UNIT));
            assert_eq!(b.held(), 0);
        });
    }
}
