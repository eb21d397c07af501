//! `cache-sim`: byte-capacity eviction policies shared by the simulator and the real
//! replica ([`eviction`]), and the trace simulator that replays a query log through a
//! routing policy into R simulated replica caches ([`sim`]), and the queueing simulator
//! that adds time: flash bandwidth, service times, queues, throughput and tail latency
//! ([`queueing`]).

pub mod eviction;
pub mod queueing;
pub mod sim;
