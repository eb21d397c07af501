//! Routing never allocates: a counting global allocator checks that, once built, every
//! policy makes zero allocations across 10,000 `route` calls — including `table` with a
//! 150,000-term table and a 3-term query — and so does the HTTP balancer's routing step
//! (its server-side load view over a table ramp in progress, `server::state::State::route`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Arc;

use balancer::{build_policy, PolicyKind, PolicyParams, QueryKey, StaticLoad, TermBytes};
use data::hash::term_hash;
use data::rng::Rng;
use data::table::{TableRow, VotingTable};

thread_local! {
    // Const-initialized, no destructor: touching it never allocates.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

/// Counts allocations (and reallocations) per thread, then defers to the system allocator.
struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the only
// extra work is bumping a thread-local counter, which does not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded contract of `GlobalAlloc::alloc`.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract of `GlobalAlloc::dealloc`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded contract of `GlobalAlloc::alloc_zeroed`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded contract of `GlobalAlloc::realloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

const REPLICAS: usize = 8;
const TERMS: usize = 150_000;

fn big_table() -> VotingTable {
    let mut rng = Rng::new(5);
    let mut rows = Vec::with_capacity(TERMS * 2);
    for t in 0..TERMS {
        let term = format!("term{t}");
        let a = rng.below(REPLICAS as u64) as u16;
        rows.push(TableRow {
            term: term.clone(),
            replica: a,
            weight: 1.0 + rng.unit() as f32,
        });
        if t % 10 == 0 {
            rows.push(TableRow {
                term,
                replica: (a + 3) % REPLICAS as u16,
                weight: rng.unit() as f32,
            });
        }
    }
    VotingTable {
        replicas: REPLICAS as u16,
        rows,
        metadata: BTreeMap::new(),
    }
}

#[test]
fn route_never_allocates() {
    // The counter counts.
    let start = allocations();
    let probe = std::hint::black_box(vec![1u8; 3]);
    assert!(allocations() > start && probe.len() == 3);

    let term_bytes: TermBytes = (0..TERMS)
        .map(|t| (term_hash(&format!("term{t}")), 16 + t as u64))
        .collect();
    let params = PolicyParams::new(REPLICAS)
        .with_table(Arc::new(big_table()))
        .with_term_bytes(Arc::new(term_bytes));
    // Two table terms and one missing term; one replica dead; loads near the cap so that
    // overflow and random jumps happen too.
    let queries: Vec<(u64, Vec<u64>)> = (0..64)
        .map(|i| {
            let terms = [
                format!("term{}", i * 997 % TERMS),
                format!("term{}", i * 7919 % TERMS),
                format!("missing{i}"),
            ];
            let hashes: Vec<u64> = terms.iter().map(|t| term_hash(t)).collect();
            (term_hash(&terms.join(" ")), hashes)
        })
        .collect();
    for kind in PolicyKind::ALL {
        let policy = build_policy(kind, &params).expect("valid params");
        let mut load = StaticLoad::with_live(
            vec![10, 30, 12, 9, 11, 40, 10, 13],
            vec![true, true, true, true, true, false, true, true],
        );
        let mut rng = Rng::new(1);
        let before = allocations();
        let mut sum = 0u64;
        for i in 0..10_000 {
            let (qh, hashes) = &queries[i % queries.len()];
            let d = policy.route(&QueryKey::new(*qh, hashes), &load, &mut rng);
            let r = usize::from(d.replica);
            load.loads[r] += 1;
            if i % 16 == 15 {
                // Drain a little, like a trailing window.
                for l in load.loads.iter_mut() {
                    *l = l.saturating_sub(1);
                }
            }
            sum += u64::from(d.replica);
        }
        let after = allocations();
        assert!(sum > 0);
        assert_eq!(after - before, 0, "{kind} allocated during routing");
    }
}

#[test]
fn server_routing_over_a_ramp_never_allocates() {
    use balancer::policy::table::TableVotes;
    use balancer::server::config::Config;
    use balancer::server::state::State;

    let mut text = String::from(
        "listen = \"127.0.0.1:0\"\nramp_secs = 3600.0\n[policy]\nname = \"table\"\ntable = \"t.parquet\"\n",
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
    let state = State::new(cfg, Arc::clone(&tb), Some(&old)).expect("state");
    let votes = TableVotes::build(&new, REPLICAS, tb).expect("table");
    state.install_table(votes).expect("ramp starts");
    // Requests in flight on some replicas, one drained: the view reads the atomics.
    let members = state.members.load();
    let slots: Vec<_> = members.slots.iter().flatten().cloned().collect();
    let _busy: Vec<_> = (0..20).map(|i| slots[i % 3].start()).collect();
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
        let _ = state.route(&QueryKey::new(*qh, hashes), 0);
    }
    let before = allocations();
    let mut sum = 0usize;
    for i in 0..10_000 {
        let (qh, hashes) = &queries[i % queries.len()];
        let choice = state
            .route(&QueryKey::new(*qh, hashes), 1 << (i % 2))
            .expect("routed");
        assert_ne!(choice.index, 5, "a drained replica got a query");
        sum += choice.index;
    }
    let after = allocations();
    assert!(sum > 0);
    assert_eq!(after - before, 0, "server routing allocated");
}
