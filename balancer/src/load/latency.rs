//! What each replica's recent answers say about its speed, for the latency-driven policies
//! (`ars`, `prequal`): exponentially weighted moving averages of the response time the
//! router measured and of the service time the replica reported, and the queue length it
//! last reported, updated as answers come back.
//!
//! The averages are Elasticsearch's (`ResponseCollectorService`: alpha 0.3, the first
//! sample seeds the average), so `ars` ranks replicas as Elasticsearch's adaptive replica
//! selection does. Only a router with time has them: the HTTP balancer (each answer's
//! head, its ORCA report's `request_cost.service_ms` and `named_metrics.backlog`) and the
//! queueing simulator (each completed query); the trace simulator has none, and the
//! policies then fall back to what they do without a sample.

use std::sync::atomic::{AtomicU64, Ordering};

use super::MAX_REPLICAS;

/// The weight of a new sample in every average (Elasticsearch's `ALPHA`).
pub const ALPHA: f64 = 0.3;

/// One replica's averages at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Latency {
    /// Response time measured by the router, ms.
    pub response_ms: f64,
    /// Service time the replica reported (its own time on the query), ms; `None` when it
    /// reports none.
    pub service_ms: Option<f64>,
    /// Queue length the replica reported with its last answer (`None`: not reported).
    pub queue: Option<f64>,
    /// Answers averaged.
    pub samples: u64,
}

/// A value slot that holds an `f64` (its bits) or "none yet" (`u64::MAX`, a NaN's bits no
/// arithmetic produces).
const NONE: u64 = u64::MAX;

/// Per replica slot: the averages, updated lock-free by concurrent answers.
#[derive(Debug)]
pub struct LatencyStats {
    response: Box<[AtomicU64]>,
    service: Box<[AtomicU64]>,
    queue: Box<[AtomicU64]>,
    samples: Box<[AtomicU64]>,
}

impl Default for LatencyStats {
    fn default() -> Self {
        let slots = || (0..MAX_REPLICAS).map(|_| AtomicU64::new(NONE)).collect();
        LatencyStats {
            response: slots(),
            service: slots(),
            queue: slots(),
            samples: (0..MAX_REPLICAS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

/// `avg ← ALPHA·x + (1 − ALPHA)·avg` in `slot` (seeded by the first sample). Concurrent
/// updates retry: none is lost.
fn average(slot: &AtomicU64, x: f64) {
    let _ = slot.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
        let next = if bits == NONE {
            x
        } else {
            ALPHA * x + (1.0 - ALPHA) * f64::from_bits(bits)
        };
        Some(next.to_bits())
    });
}

fn read(slot: &AtomicU64) -> Option<f64> {
    let bits = slot.load(Ordering::Relaxed);
    (bits != NONE).then(|| f64::from_bits(bits))
}

impl LatencyStats {
    /// Records an answer of `replica`: the response time measured, and what the replica
    /// reported with it (its service time, its queue).
    pub fn record(
        &self,
        replica: usize,
        response_ms: f64,
        service_ms: Option<f64>,
        queue: Option<f64>,
    ) {
        let Some(slot) = self.response.get(replica) else {
            return;
        };
        average(slot, response_ms.max(0.0));
        if let Some(s) = service_ms.filter(|s| s.is_finite() && *s >= 0.0) {
            average(&self.service[replica], s);
        }
        if let Some(q) = queue.filter(|q| q.is_finite() && *q >= 0.0) {
            // Averaged as Elasticsearch averages the queue size each answer reports.
            average(&self.queue[replica], q);
        }
        self.samples[replica].fetch_add(1, Ordering::Relaxed);
    }

    /// `replica`'s averages, `None` before its first answer.
    pub fn get(&self, replica: usize) -> Option<Latency> {
        Some(Latency {
            response_ms: read(self.response.get(replica)?)?,
            service_ms: read(&self.service[replica]),
            queue: read(&self.queue[replica]),
            samples: self.samples[replica].load(Ordering::Relaxed),
        })
    }

    /// Elasticsearch's `adjustStats` (`IndexShardRoutingTable`, after PR #70283): after
    /// `winner` was chosen, every other member of `mask` that has samples takes one
    /// synthetic sample of each average halfway between its own and the winner's (the
    /// queue as whole requests, as Elasticsearch truncates it). The sample count is left
    /// alone. Without this a replica that lost keeps its old averages for ever.
    pub fn adjust(&self, winner: usize, mask: u64) {
        let Some(win) = self.get(winner) else {
            return;
        };
        for r in super::members(mask & !(1u64 << winner.min(63))) {
            let Some(own) = self.get(r) else { continue };
            average(&self.response[r], (win.response_ms + own.response_ms) / 2.0);
            if let (Some(w), Some(o)) = (win.service_ms, own.service_ms) {
                average(&self.service[r], (w + o) / 2.0);
            }
            if let (Some(w), Some(o)) = (win.queue, own.queue) {
                average(&self.queue[r], ((w.trunc() + o.trunc()) / 2.0).trunc());
            }
        }
    }

    /// Forgets `replica` (a new replica in its slot starts without samples).
    pub fn reset(&self, replica: usize) {
        for slots in [&self.response, &self.service, &self.queue] {
            if let Some(s) = slots.get(replica) {
                s.store(NONE, Ordering::Relaxed);
            }
        }
        if let Some(s) = self.samples.get(replica) {
            s.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn averages_are_seeded_then_weighted_by_alpha() {
        let s = LatencyStats::default();
        assert_eq!(s.get(2), None);
        s.record(2, 10.0, None, None);
        assert_eq!(s.get(2).unwrap().response_ms, 10.0);
        s.record(2, 20.0, Some(4.0), Some(3.0));
        let l = s.get(2).unwrap();
        assert!((l.response_ms - 13.0).abs() < 1e-9, "{l:?}");
        assert_eq!(
            (l.service_ms, l.queue, l.samples),
            (Some(4.0), Some(3.0), 2)
        );
        s.record(2, 13.0, Some(14.0), Some(f64::NAN));
        let l = s.get(2).unwrap();
        assert!((l.service_ms.unwrap() - 7.0).abs() < 1e-9, "{l:?}");
        assert_eq!(l.queue, Some(3.0), "a NaN report is ignored");
        s.record(0, 4.0, Some(1.0), Some(6.0));
        s.adjust(0, 0b1111);
        let l = s.get(2).unwrap();
        // Response 0.3·(13.0+4.0)/2 + 0.7·13.0; queue (6 + 3) / 2 = 4 as whole requests.
        assert!((l.response_ms - 11.65).abs() < 1e-9, "{l:?}");
        assert!(
            (l.queue.unwrap() - (0.3 * 4.0 + 0.7 * 3.0)).abs() < 1e-9,
            "{l:?}"
        );
        assert_eq!(
            (l.samples, s.get(0).unwrap().response_ms),
            (3, 4.0),
            "the winner is untouched"
        );
        assert_eq!(s.get(1), None, "a replica without samples stays without");
        s.reset(2);
        assert_eq!(s.get(2), None);
        s.record(99, 1.0, None, None);
    }
}
