//! `cache-sim`: the trace simulator that replays a query log through a routing policy
//! into R simulated replica caches ([`sim`]; the caches are the `eviction` crate's, the
//! same code the replica serves with), and the queueing simulator
//! that adds time: flash bandwidth, service times, queues, throughput and tail latency
//! ([`queueing`]).

pub mod queueing;
pub mod sim;
