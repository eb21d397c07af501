//! The HTTP balancer's routing step never allocates: `Shard::route` by a routing snapshot's
//! policy over its server-side load view (the work window), with a table ramp in progress,
//! requests in flight and a drained replica.

use std::sync::Arc;

use balancer::{QueryKey, TermBytes};
use data::hash::term_hash;

#[path = "../../tests/support/alloc.rs"]
mod support;
use support::{allocations, big_table, REPLICAS, TERMS};

#[test]
fn server_routing_over_a_ramp_never_allocates() {
    use balancer::policy::table::TableVotes;
    use balancer_server::config::Config;
    use balancer_server::router::Router;
    use balancer_server::shard::Shard;

    let mut text = String::from(
        "listen = \"127.0.0.1:0\"\nload = \"work\"\nramp_queries = 1000000\n[policy]\nname = \"table\"\ntable = \"t.parquet\"\n",
    );
    for r in 0..REPLICAS {
        text += &format!(
            "[[replicas]]\nname = \"r{r}\"\naddress = \"127.0.0.1:{}\"\n",
            9000 + r
        );
    }
    let cfg = Config::parse(&text, std::path::Path::new("mem.toml"), |_| None).expect("config");
    let old = big_table();
    let mut new = big_table();
    for row in &mut new.rows {
        row.replica = (row.replica + 1) % REPLICAS as u16;
    }
    let tb = Arc::new(TermBytes::default());
    let router = Router::new(&cfg, REPLICAS, Arc::clone(&tb), Some(&old)).expect("router");
    let shard = Shard::new(&cfg, 0, None).expect("shard");
    let votes = TableVotes::build(&new, REPLICAS, tb).expect("table");
    router
        .install_table(votes, Vec::new().into(), None)
        .expect("ramp starts");
    // Requests in flight on some replicas, one drained: the view reads the atomics.
    let members = shard.members.load();
    let slots: Vec<_> = members.slots.iter().flatten().cloned().collect();
    let _busy: Vec<_> = (0..20)
        .map(|i| shard.slots.try_start(i % 3).expect("below the cap"))
        .collect();
    shard.record_work(1, 1 << 20);
    // A request's one snapshot of the routing state.
    let routing = router.snapshot();
    let state = |key: &QueryKey<'_>, exclude| shard.route(&*routing.policy, key, None, exclude);
    slots[5].set_drained(true);
    let queries: Vec<(u64, Vec<u64>)> = (0..64)
        .map(|i| {
            let terms = [format!("term{}", i * 997 % TERMS), format!("missing{i}")];
            let hashes: Vec<u64> = terms.iter().map(|t| term_hash(t)).collect();
            (term_hash(&terms.join(" ")), hashes)
        })
        .collect();
    // Warm up (arc-swap registers this thread once).
    for (qh, hashes) in &queries {
        let _ = state(&QueryKey::new(*qh, hashes), 0);
    }
    let before = allocations();
    let mut sum = 0usize;
    for i in 0..10_000 {
        let (qh, hashes) = &queries[i % queries.len()];
        let choice = state(&QueryKey::new(*qh, hashes), 1 << (i % 2)).expect("routed");
        assert_ne!(choice.index, 5, "a drained replica got a query");
        sum += choice.index;
    }
    let after = allocations();
    assert!(sum > 0);
    assert_eq!(after - before, 0, "server routing allocated");
}
