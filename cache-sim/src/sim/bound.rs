//! Reference bound: one cache with R times a replica's capacity, fed the whole stream.
//!
//! No routing policy can do better than the R caches behaving as one big cache with no
//! duplicated postings (DESIGN.md): this is the target the learned table is measured
//! against.

use super::replay::{ratio, SimConfig};
use super::trace::Trace;
use eviction::new_cache;

/// Miss bytes ratio over the test part of one cache of `replicas × capacity_bytes`.
pub fn one_big_cache(trace: &Trace, cfg: &SimConfig) -> f64 {
    let mut cache = new_cache(cfg.eviction, cfg.capacity_bytes * cfg.replicas as u64);
    let (mut requested, mut missed) = (0u64, 0u64);
    for q in 0..trace.len() {
        let counted = q >= trace.train_len;
        for &t in trace.terms(q) {
            let bytes = trace.term_bytes[t as usize];
            let hit = cache.access(t, bytes);
            if counted {
                requested += bytes;
                if !hit {
                    missed += bytes;
                }
            }
        }
    }
    ratio(missed, requested)
}
