//! What a router knows of the replicas besides their loads, for the peers' policies: the
//! speed of their recent answers ([`LatencyStats`], for `ars` and `prequal`) and what their
//! shadow caches hold ([`Shadow`], for `cache-aware`). [`Signaled`] adds them to any load
//! view: the HTTP balancer's, and the queueing and trace simulators', which feed the same
//! [`LatencyStats`] and [`Shadow`] code as the balancer does, so a policy reads the same
//! signals everywhere.

use super::{CacheMatch, Latency, LatencyStats, LoadView};
use crate::shadow::{Owners, Shadow};

/// The signals a router keeps (each `None` where it keeps none).
#[derive(Clone, Copy, Default)]
pub struct Signals<'a> {
    /// Each replica slot's answer speed.
    pub latency: Option<&'a LatencyStats>,
    /// The shadow caches, and who holds each slot now (`None`: an empty slot).
    pub shadow: Option<(&'a Shadow, &'a dyn Owners)>,
}

/// A load view with the router's [`Signals`]: every load figure is `base`'s.
pub struct Signaled<'a> {
    base: &'a dyn LoadView,
    signals: Signals<'a>,
}

impl<'a> Signaled<'a> {
    /// `base` with `signals`.
    pub fn new(base: &'a dyn LoadView, signals: Signals<'a>) -> Self {
        Signaled { base, signals }
    }
}

impl LoadView for Signaled<'_> {
    fn replicas(&self) -> usize {
        self.base.replicas()
    }

    #[inline]
    fn load(&self, replica: usize) -> u64 {
        self.base.load(replica)
    }

    #[inline]
    fn total(&self) -> u64 {
        self.base.total()
    }

    #[inline]
    fn live_bits(&self) -> u64 {
        self.base.live_bits()
    }

    #[inline]
    fn in_flight(&self, replica: usize) -> Option<u64> {
        self.base.in_flight(replica)
    }

    #[inline]
    fn below_cap_bits(&self, mask: u64, cap: u64) -> u64 {
        self.base.below_cap_bits(mask, cap)
    }

    fn latency(&self, replica: usize) -> Option<Latency> {
        self.signals.latency?.get(replica)
    }

    fn adjust_latency(&self, winner: usize, mask: u64) {
        if let Some(stats) = self.signals.latency {
            stats.adjust(winner, mask);
        }
    }

    fn cached(&self, replica: usize, term_hashes: &[u64]) -> Option<CacheMatch> {
        let (shadow, owner) = self.signals.shadow?;
        let owner = owner.owner(replica)?;
        let (missed, all) = shadow.peek_of(replica, owner, term_hashes);
        let capacity = shadow.cache_bytes().max(1) as f64;
        Some(CacheMatch {
            held: all - missed,
            all,
            fill: (shadow.cached_bytes(replica) as f64 / capacity).min(1.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::StaticLoad;
    use crate::shadow::Owner;
    use data::sizes::SizeTable;
    use eviction::EvictionKind;

    #[test]
    fn the_signals_come_from_the_stats_and_the_shadow() {
        let base = StaticLoad::new(vec![3, 1]);
        let stats = LatencyStats::default();
        stats.record(1, 8.0, Some(2.0), Some(1.0));
        let sizes = SizeTable::from_pairs([("a".to_owned(), 600), ("b".to_owned(), 400)]);
        let shadow = Shadow::new(&sizes, 21, 1_000, EvictionKind::Lru);
        let h = |t: &str| data::hash::term_hash(t);
        struct Two;
        impl Owners for Two {
            fn owner(&self, r: usize) -> Option<Owner> {
                (r < 2).then_some(Owner { id: r, since: 0 })
            }
        }
        shadow.access(0, Owner { id: 0, since: 0 }, &[h("a")], |_| true);
        let view = Signaled::new(
            &base,
            Signals {
                latency: Some(&stats),
                shadow: Some((&shadow, &Two)),
            },
        );
        assert_eq!((view.load(0), view.total()), (3, 4));
        assert_eq!(view.latency(0), None);
        assert_eq!(view.latency(1).map(|l| l.service_ms), Some(Some(2.0)));
        let m = view.cached(0, &[h("a"), h("b")]).unwrap();
        assert_eq!((m.held, m.all, m.share()), (600, 1_000, 0.6));
        assert!((m.fill - 0.6).abs() < 1e-9, "{m:?}");
        assert_eq!(view.cached(1, &[h("a")]).map(|m| m.held), Some(0));
        assert_eq!(view.cached(5, &[h("a")]), None, "an empty slot");
        let plain = Signaled::new(&base, Signals::default());
        assert_eq!((plain.latency(1), plain.cached(0, &[h("a")])), (None, None));
    }
}
