//! The status page's memory: the balancer's typed counters sampled every [`SAMPLE_EVERY`]
//! ([`Sample::of`] a [`Stats`] snapshot), the last ten minutes of samples kept ([`KEEP`], a
//! bounded ring), and the rates, shares and tail latency the page shows, each computed from
//! two samples.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use balancer::policy::Reason;

use balancer_server::metrics::RequestReason;
use balancer_server::stats::{ReplicaCounters, Stats};

/// How often the counters are sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// Samples kept: ten minutes of intervals, and the sample they start from.
pub const KEEP: usize = 121;

/// The counters at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    /// Unix time of the sample, seconds.
    pub at: f64,
    /// Per replica, in name order.
    pub replicas: Vec<ReplicaCounters>,
    /// Answers by [`RequestReason`], summed over the replicas, in [`RequestReason::ALL`]
    /// order.
    pub by_reason: [u64; RequestReason::ALL.len()],
}

impl Sample {
    /// The sample of the snapshot `stats`.
    pub fn of(stats: &Stats) -> Sample {
        let mut replicas: Vec<ReplicaCounters> =
            stats.replicas.iter().map(|r| r.counters.clone()).collect();
        replicas.sort_by(|a, b| a.name.cmp(&b.name));
        let mut by_reason = [0; RequestReason::ALL.len()];
        for r in &replicas {
            for (sum, n) in by_reason.iter_mut().zip(r.by_reason) {
                *sum += n;
            }
        }
        Sample {
            at: stats.at,
            replicas,
            by_reason,
        }
    }

    /// Replica `name`'s counters (`None` before it joined).
    pub fn of_replica(&self, name: &str) -> Option<&ReplicaCounters> {
        self.replicas
            .binary_search_by(|r| r.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.replicas[i])
    }
}

/// Where a flash share was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashSource {
    /// The replicas' own reports (header or ORCA).
    Reported,
    /// The balancer's shadow caches.
    Shadow,
}

impl FlashSource {
    /// `"reported"` or `"shadow"`.
    pub fn name(self) -> &'static str {
        match self {
            FlashSource::Reported => "reported",
            FlashSource::Shadow => "shadow",
        }
    }
}

/// What happened between two samples.
#[derive(Clone, Copy, Debug)]
pub struct Interval<'a> {
    /// The earlier sample.
    pub from: &'a Sample,
    /// The later one.
    pub to: &'a Sample,
}

impl Interval<'_> {
    /// Seconds between the samples (at least a millisecond).
    pub fn seconds(&self) -> f64 {
        (self.to.at - self.from.at).max(1e-3)
    }

    fn delta(&self, name: &str, field: fn(&ReplicaCounters) -> u64) -> f64 {
        let to = self.to.of_replica(name).map_or(0, field);
        let from = self.from.of_replica(name).map_or(0, field);
        to.saturating_sub(from) as f64
    }

    /// Replica `name`'s answers per second.
    pub fn rate(&self, name: &str) -> f64 {
        self.delta(name, ReplicaCounters::requests) / self.seconds()
    }

    /// Each replica's share of the flash bytes read in the interval, by name, and where they
    /// were measured: the replicas' reports when any replica reported bytes, else the shadow
    /// caches' estimate; `None` when neither saw a byte.
    pub fn flash_shares(&self) -> Option<(Vec<(String, f64)>, FlashSource)> {
        let names: Vec<&str> = self.to.replicas.iter().map(|r| r.name.as_str()).collect();
        for (source, field) in [
            (
                FlashSource::Reported,
                (|r: &ReplicaCounters| r.reported_miss) as fn(&ReplicaCounters) -> u64,
            ),
            (FlashSource::Shadow, |r: &ReplicaCounters| r.shadow_miss),
        ] {
            let bytes: Vec<f64> = names.iter().map(|n| self.delta(n, field)).collect();
            let total: f64 = bytes.iter().sum();
            if total > 0.0 {
                let shares = names
                    .iter()
                    .zip(&bytes)
                    .map(|(n, b)| ((*n).to_owned(), b / total))
                    .collect();
                return Some((shares, source));
            }
        }
        None
    }

    /// Flash bytes per second reported by replica `name`, or estimated by its shadow cache
    /// when it reported none.
    pub fn flash_rate(&self, name: &str) -> (f64, Option<FlashSource>) {
        let reported = self.delta(name, |r| r.reported_miss);
        if reported > 0.0 {
            return (reported / self.seconds(), Some(FlashSource::Reported));
        }
        let shadow = self.delta(name, |r| r.shadow_miss);
        if shadow > 0.0 {
            return (shadow / self.seconds(), Some(FlashSource::Shadow));
        }
        (0.0, None)
    }

    /// The 99th percentile of upstream latency, seconds, of replica `name` or (`None`) of
    /// all of them: the upper bound of the histogram bucket that holds it. `None` without
    /// answers in the interval; infinite when it is past the last finite bucket.
    pub fn p99(&self, name: Option<&str>) -> Option<f64> {
        let mut bounds: Vec<(f64, f64)> = Vec::new();
        for r in &self.to.replicas {
            if name.is_some_and(|n| n != r.name) {
                continue;
            }
            let before = self.from.of_replica(&r.name);
            for &(le, count) in &r.buckets {
                let was = before
                    .and_then(|b| b.buckets.iter().find(|x| x.0 == le))
                    .map_or(0, |x| x.1);
                let d = count.saturating_sub(was) as f64;
                match bounds.iter_mut().find(|x| x.0 == le) {
                    Some(x) => x.1 += d,
                    None => bounds.push((le, d)),
                }
            }
        }
        bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
        let total = bounds.last()?.1;
        if total <= 0.0 {
            return None;
        }
        let want = 0.99 * total;
        bounds.iter().find(|(_, c)| *c >= want).map(|&(le, _)| le)
    }

    /// Answers by the policy's reason in the interval (retries left out).
    fn reasons(&self) -> [f64; RequestReason::ALL.len()] {
        let mut d = [0.0; RequestReason::ALL.len()];
        for (i, x) in d.iter_mut().enumerate() {
            *x = self.to.by_reason[i].saturating_sub(self.from.by_reason[i]) as f64;
        }
        d
    }

    /// The share of first attempts that left their first choice because it was full (by
    /// its load or by the stall guard), and the stall guard's part of them; `None` without
    /// routed queries.
    pub fn overflow_share(&self) -> Option<(f64, f64)> {
        let d = self.reasons();
        let at = |r: Reason| d[RequestReason::Policy(r).index()];
        let routed: f64 = Reason::ALL.iter().map(|&r| at(r)).sum();
        (routed > 0.0).then(|| {
            let overflow = at(Reason::Overflow) + at(Reason::Stalled);
            (overflow / routed, at(Reason::Stalled) / routed)
        })
    }

    /// The share of answers to requests whose query could not be read (routed blind by the
    /// fallback policy); `None` without answers.
    pub fn blind_share(&self) -> Option<f64> {
        let d = self.reasons();
        let all: f64 = d.iter().sum();
        (all > 0.0).then(|| d[RequestReason::Fallback.index()] / all)
    }

    /// Answers per second by every reason, `(name, rate)`, retries (`failover`) included.
    pub fn reason_rates(&self) -> Vec<(&'static str, f64)> {
        let d = self.reasons();
        RequestReason::ALL
            .iter()
            .zip(d)
            .map(|(r, x)| (r.name(), x / self.seconds()))
            .collect()
    }
}

/// The ring of samples.
#[derive(Debug)]
pub struct History {
    samples: Mutex<VecDeque<Sample>>,
    /// Unix time the balancer started: every counter was zero then.
    started: f64,
}

impl History {
    /// An empty history of a balancer that started at unix time `started`.
    pub fn new(started: f64) -> History {
        History {
            samples: Mutex::new(VecDeque::with_capacity(KEEP)),
            started,
        }
    }

    /// The all-zero sample at the balancer's start.
    pub fn start(&self) -> Sample {
        Sample {
            at: self.started,
            ..Sample::default()
        }
    }

    /// Adds a sample, dropping the oldest past [`KEEP`].
    pub fn record(&self, sample: Sample) {
        let mut s = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if s.len() >= KEEP {
            s.pop_front();
        }
        s.push_back(sample);
    }

    /// Runs `f` over the samples, oldest first.
    pub fn with<T>(&self, f: impl FnOnce(&VecDeque<Sample>) -> T) -> T {
        f(&self.samples.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use balancer::policy::Reason;

    /// r0's and r1's counters: `vote` and `overflow` answers on r0, `stall-guard` and one
    /// `failover` on r1, shadow bytes `miss`, and r0's answers all under 0.1 s, `fast` of
    /// them under 0.01 s.
    fn sample(
        at: f64,
        vote: u64,
        overflow: u64,
        stalled: u64,
        miss: (u64, u64),
        fast: u64,
    ) -> Sample {
        let reason = |r| RequestReason::of(r).index();
        let mut r0 = ReplicaCounters {
            name: "r0".into(),
            shadow_miss: miss.0,
            buckets: vec![
                (0.01, fast),
                (0.1, vote + overflow),
                (f64::INFINITY, vote + overflow),
            ],
            ..ReplicaCounters::default()
        };
        r0.by_reason[reason(Reason::Vote)] = vote;
        r0.by_reason[reason(Reason::Overflow)] = overflow;
        let mut r1 = ReplicaCounters {
            name: "r1".into(),
            shadow_miss: miss.1,
            ..ReplicaCounters::default()
        };
        r1.by_reason[reason(Reason::Stalled)] = stalled;
        r1.by_reason[RequestReason::Failover.index()] = 1;
        let mut by_reason = [0; RequestReason::ALL.len()];
        for r in [&r0, &r1] {
            for (sum, n) in by_reason.iter_mut().zip(r.by_reason) {
                *sum += n;
            }
        }
        Sample {
            at,
            replicas: vec![r0, r1],
            by_reason,
        }
    }

    #[test]
    fn rates_shares_and_the_tail_from_two_samples() {
        let a = sample(100.0, 10, 0, 0, (0, 0), 10);
        let b = sample(110.0, 100, 5, 5, (3_000, 1_000), 100);
        let i = Interval { from: &a, to: &b };
        assert_eq!(i.rate("r0"), 9.5);
        assert_eq!(i.rate("r1"), 0.5);
        let (shares, source) = i.flash_shares().expect("bytes were read");
        assert_eq!(source, FlashSource::Shadow);
        assert_eq!(shares, vec![("r0".into(), 0.75), ("r1".into(), 0.25)]);
        // 95 answers, 90 of them under 10 ms: the 99th percentile is in the 0.1 s bucket.
        assert_eq!(i.p99(Some("r0")), Some(0.1));
        assert_eq!(i.p99(Some("r1")), None);
        let (overflow, stalled) = i.overflow_share().expect("queries were routed");
        assert_eq!((overflow, stalled), (10.0 / 100.0, 5.0 / 100.0));
        assert_eq!(i.flash_rate("r0"), (300.0, Some(FlashSource::Shadow)));
    }

    #[test]
    fn the_ring_keeps_ten_minutes() {
        let h = History::new(0.0);
        for t in 0..KEEP + 10 {
            h.record(Sample {
                at: t as f64,
                ..Sample::default()
            });
        }
        h.with(|s| {
            assert_eq!(s.len(), KEEP);
            assert_eq!(s.front().map(|x| x.at), Some(10.0));
        });
    }
}
