//! The replica set: each backend's address, connection pool, health state and metric
//! handles ([`Replica`]), the slots that give replicas their table index ([`Members`]), and
//! the query clock that stamps when a replica last became live ([`QueryClock`]).
//!
//! A replica's index is its position in the table's index space and never changes while it
//! is a member; removing a replica leaves its slot empty (its votes fall to the
//! next-ranked live candidate) and adding one fills the first empty slot. Health follows
//! HAProxy's `check fall F rise R` with passive ejection on failed requests; a replica that
//! becomes live again is stamped with the query clock so the load view can give it a slow
//! start (HAProxy's `slowstart`, counted in routed queries instead of seconds).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use balancer::shadow::{Owner, Owners};

use axum::http::HeaderValue;

use crate::metrics::ReplicaMetrics;
use crate::stats::ReplicaStats;
use crate::upstream::Pool;

/// Queries routed so far (first attempts): the clock of slow starts.
#[derive(Debug, Default)]
pub struct QueryClock(AtomicU64);

impl QueryClock {
    /// The current count.
    #[inline]
    pub fn now(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Counts one routed query.
    #[inline]
    pub fn tick(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Why a replica could not be created.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// The name cannot label a replica.
    #[error("replica name `{0}` must be 1 to 64 characters of [A-Za-z0-9._-]")]
    Name(String),
    /// The address is not `host:port`.
    #[error("address `{0}` must be host:port")]
    Address(String),
}

/// Checks that `name` can label a replica (non-empty, no spaces, no slashes).
pub fn check_name(name: &str) -> Result<(), ReplicaError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    ok.then_some(())
        .ok_or_else(|| ReplicaError::Name(name.to_owned()))
}

/// Checks that `address` is a `host:port` an HTTP URI can hold.
pub fn check_address(address: &str) -> Result<(), ReplicaError> {
    let ok = !address.is_empty()
        && address.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0)
        })
        && address.parse::<axum::http::uri::Authority>().is_ok()
        && !address.contains('@');
    ok.then_some(())
        .ok_or_else(|| ReplicaError::Address(address.to_owned()))
}

/// One backend replica.
pub struct Replica {
    /// Unique name.
    pub name: String,
    /// `host:port`.
    pub address: String,
    /// Idle keep-alive connections to it.
    pub pool: Arc<Pool>,
    /// `x-ballot-replica` value.
    pub header: HeaderValue,
    /// Metric handles of the counters only `/metrics` shows.
    pub metrics: ReplicaMetrics,
    /// The counters the operator's surfaces read.
    pub stats: ReplicaStats,
    clock: Arc<QueryClock>,
    healthy: AtomicBool,
    drained: AtomicBool,
    removed: AtomicBool,
    fails: AtomicU32,
    passes: AtomicU32,
    live_since: AtomicU64,
    /// Active health checks recorded so far: the health checker's own clock.
    checks: AtomicU64,
    /// The value of `checks` when health last changed (ejection or re-admission).
    health_changed_at: AtomicU64,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica")
            .field("name", &self.name)
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl Replica {
    /// A healthy, enabled replica, live since `clock`'s current count (checked name and
    /// address).
    pub fn new(name: &str, address: &str, clock: Arc<QueryClock>) -> Result<Self, ReplicaError> {
        check_name(name)?;
        check_address(address)?;
        let header =
            HeaderValue::from_str(name).map_err(|_| ReplicaError::Name(name.to_owned()))?;
        let pool = Pool::new(address).map_err(|_| ReplicaError::Address(address.to_owned()))?;
        let live_since = clock.now();
        Ok(Replica {
            name: name.to_owned(),
            address: address.to_owned(),
            pool: Arc::new(pool),
            header,
            metrics: ReplicaMetrics::new(name),
            stats: ReplicaStats::default(),
            clock,
            healthy: AtomicBool::new(true),
            drained: AtomicBool::new(false),
            removed: AtomicBool::new(false),
            fails: AtomicU32::new(0),
            passes: AtomicU32::new(0),
            live_since: AtomicU64::new(live_since),
            checks: AtomicU64::new(0),
            health_changed_at: AtomicU64::new(0),
        })
    }

    /// Passed health checks (or not ejected).
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    /// Drained by the admin API.
    pub fn is_drained(&self) -> bool {
        self.drained.load(Ordering::Relaxed)
    }

    /// Removed from the set (its health checks stop).
    pub fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Relaxed)
    }

    /// Marks the replica removed.
    pub fn set_removed(&self) {
        self.removed.store(true, Ordering::Relaxed);
    }

    /// Whom a shadow cache of this replica belongs to: the replica object and the moment
    /// it last became live, so a cache built before a restart is not taken for its own.
    pub fn owner(self: &Arc<Self>) -> Owner {
        Owner {
            id: Arc::as_ptr(self) as usize,
            since: self.live_since(),
        }
    }

    /// The query-clock count at which the replica last became live.
    #[inline]
    pub fn live_since(&self) -> u64 {
        self.live_since.load(Ordering::Relaxed)
    }

    fn became_live(&self) {
        self.live_since.store(self.clock.now(), Ordering::Relaxed);
    }

    /// Drains (`true`) or enables (`false`) the replica; enabling a drained replica starts
    /// its slow start.
    pub fn set_drained(&self, drained: bool) {
        if self.drained.swap(drained, Ordering::Relaxed) && !drained {
            self.became_live();
        }
    }

    /// Active health checks recorded so far. Together with
    /// [`health_changed_at_check`](Replica::health_changed_at_check) it tells how many
    /// checks an ejection or re-admission took, whatever the wall time (`GET
    /// /admin/replicas` shows both).
    pub fn checks(&self) -> u64 {
        self.checks.load(Ordering::Relaxed)
    }

    /// The number of checks recorded when health last changed (0 if it never did).
    pub fn health_changed_at_check(&self) -> u64 {
        self.health_changed_at.load(Ordering::Relaxed)
    }

    /// Ejects the replica (passively, after a failed request, or after `fall` failed checks);
    /// it returns after `rise` passed checks.
    pub fn eject(&self, why: &str) {
        self.passes.store(0, Ordering::Relaxed);
        if self.healthy.swap(false, Ordering::Relaxed) {
            self.health_changed_at
                .store(self.checks.load(Ordering::Relaxed), Ordering::Relaxed);
            self.metrics.ejections.increment(1);
            tracing::warn!("ejected replica {} ({why})", self.name);
        }
    }

    /// Records one active health check; `rise` passes in a row re-admit an ejected replica
    /// (and start its slow start), `fall` failures in a row eject it.
    pub fn record_check(&self, passed: bool, fall: u32, rise: u32) {
        let check = self.checks.fetch_add(1, Ordering::Relaxed) + 1;
        if passed {
            self.fails.store(0, Ordering::Relaxed);
            let passes = self
                .passes
                .fetch_add(1, Ordering::Relaxed)
                .saturating_add(1);
            if passes >= rise && !self.healthy.swap(true, Ordering::Relaxed) {
                self.health_changed_at.store(check, Ordering::Relaxed);
                self.became_live();
                tracing::info!("re-admitted replica {}", self.name);
            }
        } else {
            self.passes.store(0, Ordering::Relaxed);
            let fails = self.fails.fetch_add(1, Ordering::Relaxed).saturating_add(1);
            if fails >= fall {
                self.eject("health check failed");
            }
        }
    }
}

/// The replica slots; the index is the table index.
#[derive(Debug, Default)]
pub struct Members {
    /// `None`: a removed replica's slot.
    pub slots: Vec<Option<Arc<Replica>>>,
}

impl Owners for Members {
    fn owner(&self, slot: usize) -> Option<Owner> {
        self.slots.get(slot)?.as_ref().map(Replica::owner)
    }
}

impl Members {
    /// The member named `name`, with its index.
    pub fn find(&self, name: &str) -> Option<(usize, &Arc<Replica>)> {
        self.slots
            .iter()
            .enumerate()
            .find_map(|(i, s)| s.as_ref().filter(|r| r.name == name).map(|r| (i, r)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fall_and_rise_and_slow_start_stamps() {
        let clock = Arc::new(QueryClock::default());
        let r = Replica::new("x", "127.0.0.1:1", Arc::clone(&clock)).unwrap();
        assert_eq!(r.live_since(), 0);
        r.record_check(false, 2, 3);
        assert!(r.is_healthy());
        r.record_check(false, 2, 3);
        assert!(!r.is_healthy());
        assert_eq!((r.checks(), r.health_changed_at_check()), (2, 2));
        for _ in 0..7 {
            clock.tick();
        }
        r.record_check(true, 2, 3);
        r.record_check(true, 2, 3);
        assert!(!r.is_healthy());
        r.record_check(true, 2, 3);
        assert!(r.is_healthy());
        assert_eq!((r.checks(), r.health_changed_at_check()), (5, 5));
        assert_eq!(r.live_since(), 7);
        // A passive ejection is stamped with the checks recorded so far.
        r.record_check(true, 2, 3);
        r.eject("a failed request");
        assert_eq!((r.checks(), r.health_changed_at_check()), (6, 6));
        r.eject("again: no change");
        r.record_check(false, 2, 3);
        assert_eq!((r.checks(), r.health_changed_at_check()), (7, 6));
        for _ in 0..3 {
            r.record_check(true, 2, 3);
        }
        assert_eq!((r.checks(), r.health_changed_at_check()), (10, 10));
        clock.tick();
        r.set_drained(true);
        r.set_drained(false);
        assert_eq!(r.live_since(), 8);
        clock.tick();
        r.set_drained(false); // not drained: no new slow start
        assert_eq!(r.live_since(), 8);
    }

    #[test]
    fn names_and_addresses_are_checked() {
        let clock = Arc::new(QueryClock::default());
        for (name, addr) in [("", "h:1"), ("a b", "h:1"), ("a", "nowhere"), ("a", "h:0")] {
            assert!(
                Replica::new(name, addr, Arc::clone(&clock)).is_err(),
                "{name} {addr}"
            );
        }
    }
}
