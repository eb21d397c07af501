//! Feeds each query to its replica's shadow cache when it is sent (`[shadow]`,
//! [`balancer::shadow`]): the cache's misses are the attempt's flash-byte estimate, which the
//! work load reads ([`super::feedback`]) and `ballot_shadow_miss_bytes_total` counts. The
//! cache keeps a missed list as the replica does: all but the lists the attempt's cache
//! hint names, when the hint applies at the shadow's size.
//!
//! One first attempt in [`SAMPLE`] is also priced on every live replica's shadow cache
//! first, without feeding them: the chosen replica's bytes and their mean (round-robin's
//! expected bytes) go to `ballot_sampled_miss_bytes_total`, the bytes the routing saves.

use std::cell::Cell;

use metrics::Counter;

use super::Hook;
use crate::ctx::{Attempt, Ctx};
use crate::metrics as m;
use crate::shard::Shard;

/// One first attempt in this many is priced on every replica's cache too (the cost is a
/// peek per live replica: sampling keeps it off most requests).
pub const SAMPLE: u32 = 16;

thread_local! {
    /// First attempts fed on this thread.
    static FED: Cell<u32> = const { Cell::new(0) };
}

/// The shadow feed's hook.
pub struct ShadowFeed {
    sampled_chosen: Counter,
    sampled_round_robin: Counter,
}

impl Default for ShadowFeed {
    /// The hook, with its counters.
    fn default() -> Self {
        ShadowFeed {
            sampled_chosen: metrics::counter!(m::SAMPLED_MISS_BYTES, "route" => "chosen"),
            sampled_round_robin: metrics::counter!(m::SAMPLED_MISS_BYTES, "route" => "round-robin"),
        }
    }
}

impl ShadowFeed {
    /// The mean bytes the query would miss over `shard`'s live replicas now.
    fn round_robin(shard: &Shard, term_hashes: &[u64]) -> Option<u64> {
        let shadow = shard.shadow.as_ref()?;
        let members = shard.members.load();
        let (mut sum, mut live) = (0u64, 0u64);
        for (i, rep) in members.slots.iter().enumerate() {
            let Some(rep) = rep.as_ref().filter(|r| r.is_healthy() && !r.is_drained()) else {
                continue;
            };
            sum += shadow.peek(i, rep.owner(), term_hashes);
            live += 1;
        }
        Some(sum / live.max(1))
    }
}

impl Hook for ShadowFeed {
    fn on_send(&self, ctx: &Ctx, shard: &Shard, attempt: &mut Attempt) {
        let (Some(terms), Some(shadow)) = (&ctx.terms, &shard.shadow) else {
            return;
        };
        let sampled = attempt.number == 0
            && FED.with(|n| {
                let next = n.get().wrapping_add(1);
                n.set(next);
                next.is_multiple_of(SAMPLE)
            });
        let round_robin = sampled
            .then(|| Self::round_robin(shard, terms.hashes()))
            .flatten();
        let no_cache = &attempt.no_cache;
        let kept_out = if no_cache.applies_to(shadow.cache_bytes()) {
            no_cache.hashes()
        } else {
            &[]
        };
        let choice = &attempt.choice;
        let missed = shadow.access(choice.index, choice.replica.owner(), terms.hashes(), |h| {
            !kept_out.contains(&h)
        });
        if let Some(rr) = round_robin {
            // The chosen replica's bytes are what feeding its cache just missed.
            self.sampled_chosen.increment(missed);
            self.sampled_round_robin.increment(rr);
        }
        choice.replica.stats.add_shadow_miss(missed);
        attempt.shadow_miss = Some(missed);
    }
}
