//! A hand-set [`LoadView`] for the policies' unit tests: loads, liveness, requests in
//! flight, latencies and shadow-cache matches as each test gives them, and the last
//! `adjust_latency` call recorded, so a hand-worked case states only what it needs.

use std::cell::Cell;

use crate::load::{CacheMatch, Latency, LoadView};

/// The view; every replica live, no signal, until a `with_` sets one.
pub struct TestView {
    pub loads: Vec<u64>,
    pub live: u64,
    pub in_flight: Option<Vec<u64>>,
    pub latency: Vec<Option<Latency>>,
    pub cached: Vec<Option<CacheMatch>>,
    /// The last `adjust_latency(winner, mask)`.
    pub adjusted: Cell<Option<(usize, u64)>>,
}

impl TestView {
    pub fn new(loads: Vec<u64>) -> Self {
        let live = (1u64 << loads.len()) - 1;
        TestView {
            loads,
            live,
            in_flight: None,
            latency: Vec::new(),
            cached: Vec::new(),
            adjusted: Cell::new(None),
        }
    }

    pub fn with_live(mut self, live: u64) -> Self {
        self.live = live;
        self
    }

    pub fn with_latency(mut self, latency: Vec<Option<Latency>>) -> Self {
        self.latency = latency;
        self
    }

    /// Response times alone (`None`: no sample yet), as a replica that reports nothing.
    pub fn with_response_ms(self, response_ms: Vec<Option<f64>>) -> Self {
        let latency = response_ms
            .into_iter()
            .map(|ms| {
                ms.map(|response_ms| Latency {
                    response_ms,
                    service_ms: None,
                    queue: None,
                    samples: 1,
                })
            })
            .collect();
        self.with_latency(latency)
    }

    pub fn with_cached(mut self, cached: Vec<Option<CacheMatch>>) -> Self {
        self.cached = cached;
        self
    }
}

impl LoadView for TestView {
    fn replicas(&self) -> usize {
        self.loads.len()
    }

    fn load(&self, replica: usize) -> u64 {
        self.loads[replica]
    }

    fn total(&self) -> u64 {
        self.loads.iter().sum()
    }

    fn live_bits(&self) -> u64 {
        self.live
    }

    fn in_flight(&self, replica: usize) -> Option<u64> {
        self.in_flight.as_ref().map(|f| f[replica])
    }

    fn latency(&self, replica: usize) -> Option<Latency> {
        self.latency.get(replica).copied().flatten()
    }

    fn adjust_latency(&self, winner: usize, mask: u64) {
        self.adjusted.set(Some((winner, mask)));
    }

    fn cached(&self, replica: usize, _term_hashes: &[u64]) -> Option<CacheMatch> {
        self.cached.get(replica).copied().flatten()
    }
}
