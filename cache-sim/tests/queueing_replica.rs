//! The queueing simulator's replica and balancer model, checked exactly on tiny traces
//! (latencies computed by hand from the replica's flash emulation), and its zero-time
//! phases checked against the trace replay decision for decision.

use std::sync::Arc;

use balancer::policy::{build_policy, PolicyKind, PolicyParams, RoutingPolicy};
use cache_sim::queueing::{
    simulate, Arrivals, Cores, Fanout, PhaseResult, QueueConfig, Router, Service, Simulator,
};
use cache_sim::sim::{replay, NoObserver, SimConfig, SimLoad, Trace};
use data::sizes::{FreqTable, SizeModel, SizeTable, Sizes};
use data::synth::{generate, SynthConfig};
use eviction::EvictionKind;

/// Terms a (1,000 bytes), b (3,000 bytes), c (2,000 bytes).
fn trace(queries: &[&str]) -> Trace {
    let sizes = Sizes::Table(SizeTable::from_pairs([
        ("a".to_string(), 1000),
        ("b".to_string(), 3000),
        ("c".to_string(), 2000),
    ]));
    Trace::build(queries.iter().copied(), 0, &sizes)
}

fn round_robin(replicas: usize) -> Box<dyn RoutingPolicy> {
    build_policy(PolicyKind::RoundRobin, &PolicyParams::new(replicas)).unwrap()
}

/// One replica, 1 MB/s flash, big cache, 50 µs of CPU per query.
fn config(replicas: usize) -> QueueConfig {
    let mut cfg = QueueConfig::new(replicas, 1 << 20);
    cfg.replica.flash_read_mbps = Some(1.0);
    cfg.replica.cpu_us = 50.0;
    cfg
}

fn run(trace: &Trace, cfg: &QueueConfig, arrivals: Arrivals) -> PhaseResult {
    let policy = round_robin(cfg.replicas);
    let mut sim = Simulator::new(Some(trace), Router::Policy(policy.as_ref()), cfg).unwrap();
    sim.run(0..trace.len(), &arrivals).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * b.abs().max(1.0)
}

#[test]
fn one_miss_costs_cpu_plus_latency_plus_transfer() {
    let t = trace(&["a"]);
    let mut cfg = config(1);
    cfg.replica.flash_latency_us = 100.0;
    let r = run(&t, &cfg, Arrivals::Closed { clients: 1 });
    // 0.05 ms CPU + 0.1 ms latency + 1,000 bytes at 1 MB/s (the bucket starts empty).
    assert!(close(r.latency_ms.max, 1.15), "{}", r.latency_ms.max);
    assert_eq!((r.ok, r.shed), (1, 0));
    assert_eq!(r.miss_bytes_ratio, 1.0);
    assert!(close(r.flash_bytes_per_query, 1000.0));
}

#[test]
fn a_query_reads_its_terms_one_after_another() {
    // a then b, back to back: 4,000 bytes at 1 MB/s, then the CPU part.
    let t = trace(&["a b"]);
    let r = run(&t, &config(1), Arrivals::Closed { clients: 1 });
    assert!(close(r.latency_ms.max, 4.05), "{}", r.latency_ms.max);
    // Run again on the now warm cache: hits cost nothing.
    let policy = round_robin(1);
    let mut sim = Simulator::new(Some(&t), Router::Policy(policy.as_ref()), &config(1)).unwrap();
    sim.run(0..1, &Arrivals::Closed { clients: 1 }).unwrap();
    let warm = sim.run(0..1, &Arrivals::Closed { clients: 1 }).unwrap();
    assert!(close(warm.latency_ms.max, 0.05), "{}", warm.latency_ms.max);
    assert_eq!(warm.miss_bytes_ratio, 0.0);
}

#[test]
fn two_misses_on_one_term_read_it_once() {
    let t = trace(&["a", "a"]);
    let r = run(&t, &config(1), Arrivals::Closed { clients: 2 });
    // Both wait for the one read; the second is coalesced (a hit, no flash bytes).
    assert!(close(r.latency_ms.p50, 1.05) && close(r.latency_ms.max, 1.05));
    assert!(close(r.flash_bytes_per_query, 500.0));
    assert_eq!(r.miss_bytes_ratio, 0.5);
}

#[test]
fn reads_of_different_terms_share_the_bandwidth_in_order() {
    // a (1 ms of flash) and c (2 ms) at once: c is served after a.
    let t = trace(&["a", "c"]);
    let r = run(&t, &config(1), Arrivals::Closed { clients: 2 });
    assert!(close(r.latency_ms.p50, 1.05) && close(r.latency_ms.max, 3.05));
    assert!(close(r.throughput_qps, 2.0 / 3.05e-3));
    assert!(close(r.utilisation[0], 1.0));
    assert!(close(r.flash_utilisation[0], 3000.0 / (1e6 * 3.05e-3)));
    // Mean in flight: 2 for 1.05 ms, then 1 for 2 ms.
    assert!(close(r.queue_mean[0], (2.0 * 1.05 + 2.0) / 3.05));
    assert_eq!(r.queue_max_all, 2);
}

#[test]
fn past_max_inflight_a_query_is_shed() {
    let t = trace(&["a", "b"]);
    let mut cfg = config(1);
    cfg.replica.max_inflight = 1;
    let r = run(&t, &cfg, Arrivals::Closed { clients: 2 });
    assert_eq!((r.sent, r.ok, r.shed), (2, 1, 1));
    assert_eq!(r.error_share, 0.5);
}

#[test]
fn a_busy_worker_pool_queues_first_come_first_served() {
    // CPU 10 ms. Two workers: a done at 1 + 10 ms, b's read waits for a's (2 ms) then
    // 10 ms. One worker: b starts when a is done, at 11 ms, with the bucket refilled.
    let t = trace(&["a", "c"]);
    let mut cfg = config(1);
    cfg.replica.cpu_us = 10_000.0;
    let r = run(&t, &cfg, Arrivals::Closed { clients: 2 });
    assert!(close(r.latency_ms.max, 13.0), "{}", r.latency_ms.max);
    cfg.replica.workers = 1;
    let r = run(&t, &cfg, Arrivals::Closed { clients: 2 });
    assert!(close(r.latency_ms.max, 21.0), "{}", r.latency_ms.max);
}

#[test]
fn shared_cores_serialize_the_cpu_parts() {
    let t = trace(&["", "", ""]);
    let mut cfg = config(2);
    cfg.replica.cpu_us = 1000.0;
    cfg.cores = Cores::Shared(1);
    let r = run(&t, &cfg, Arrivals::Closed { clients: 3 });
    assert!(close(r.latency_ms.p50, 2.0) && close(r.latency_ms.max, 3.0));
    cfg.cores = Cores::PerReplica(1);
    // Round-robin: replicas 0, 1, 0.
    let r = run(&t, &cfg, Arrivals::Closed { clients: 3 });
    assert!(close(r.latency_ms.p50, 1.0) && close(r.latency_ms.max, 2.0));
}

#[test]
fn a_fixed_schedule_sends_on_time() {
    // Two queries 10 ms apart on a cold then warm cache: latency from the intended time.
    let t = trace(&["b", "b"]);
    let r = run(&t, &config(1), Arrivals::Fixed { rate: 100.0 });
    assert!(close(r.latency_ms.max, 3.05) && close(r.latency_ms.p50, 0.05));
    assert_eq!(r.offered_qps, Some(100.0));
    assert!(close(r.seconds, 0.01005));
}

#[test]
fn shards_split_the_lists_and_wait_for_the_slowest() {
    // Two shards: each holds half of b (1,500 bytes, 1.5 ms) and reads it in parallel.
    let t = trace(&["b"]);
    let mut cfg = config(1);
    cfg.fanout = Fanout::Shards(2);
    let r = run(&t, &cfg, Arrivals::Closed { clients: 1 });
    assert!(close(r.latency_ms.max, 1.55), "{}", r.latency_ms.max);
    assert_eq!(r.flash_shares, vec![0.5, 0.5]);
    // Power of 2 per shard over 2 replicas each spreads two queries of one client... to
    // any replica; the shard figures still add up.
    let mut sim = Simulator::new(Some(&t), Router::PowerOfD { d: 2 }, &cfg).unwrap();
    let r = sim.run(0..1, &Arrivals::Closed { clients: 1 }).unwrap();
    assert!(close(r.latency_ms.max, 1.55));
}

#[test]
fn service_time_draws_replace_the_flash_model() {
    let t = trace(&["a"; 1000]);
    let mut cfg = config(1);
    cfg.service = Service::Exp { mean: 0.001 };
    cfg.replica.workers = 1;
    let r = run(&t, &cfg, Arrivals::Closed { clients: 1 });
    // One client, one worker: throughput is 1 / mean service (1,000 draws: ±10%).
    assert!(
        (r.throughput_qps / 1000.0 - 1.0).abs() < 0.1,
        "{}",
        r.throughput_qps
    );
    assert_eq!(r.miss_bytes_ratio, 0.0);
}

fn synthetic() -> Trace {
    let log = generate(&SynthConfig {
        queries: 30_000,
        ..SynthConfig::default()
    });
    let sizes = Sizes::Model {
        freq: FreqTable::from_pairs(log.freq),
        model: SizeModel::default(),
    };
    Trace::build(log.queries.iter().map(String::as_str), 20_000, &sizes)
}

#[test]
fn zero_time_phases_reproduce_the_trace_replay() {
    let t = synthetic();
    let params = PolicyParams {
        term_bytes: Arc::new(t.term_bytes_map()),
        ..PolicyParams::new(8)
    };
    let capacity = t.capacity_for(0.05);
    for kind in [PolicyKind::ChBl, PolicyKind::TermVote, PolicyKind::P2c] {
        for (load, sim_load) in [
            (balancer::LoadKind::Window, SimLoad::Queries),
            (
                balancer::LoadKind::Work,
                SimLoad::Work {
                    query_bytes: balancer::load::DEFAULT_WORK_QUERY_BYTES,
                },
            ),
        ] {
            let policy = build_policy(kind, &params).unwrap();
            let want = replay(
                &t,
                policy.as_ref(),
                &SimConfig {
                    admission: None,
                    replicas: 8,
                    capacity_bytes: capacity,
                    eviction: EvictionKind::Lru,
                    window: 1000,
                    seed: 7,
                    load: sim_load,
                },
                &mut NoObserver,
            );
            let mut cfg = QueueConfig::new(8, capacity);
            cfg.balancer.window = 1000;
            cfg.balancer.load = load;
            cfg.seed = 7;
            let policy = build_policy(kind, &params).unwrap();
            let got = simulate(
                &t,
                policy.as_ref(),
                &cfg,
                &Arrivals::Instant,
                &Arrivals::Instant,
            )
            .unwrap()
            .test;
            assert_eq!(got.miss_bytes_ratio, want.miss_bytes_ratio, "{kind} {load}");
            assert_eq!(got.flash_shares, want.flash_shares, "{kind} {load}");
            assert_eq!(got.overflow_share, want.overflow_share, "{kind} {load}");
            assert_eq!(got.task_shares, want.replica_query_share, "{kind} {load}");
        }
    }
}

#[test]
fn runs_are_deterministic_and_the_loads_differ() {
    let t = synthetic();
    let params = PolicyParams {
        term_bytes: Arc::new(t.term_bytes_map()),
        ..PolicyParams::new(8)
    };
    let policy = build_policy(PolicyKind::TermVote, &params).unwrap();
    let mut cfg = QueueConfig::new(8, t.capacity_for(0.05));
    cfg.replica.flash_read_mbps = Some(20.0);
    cfg.replica.cpu_us = 200.0;
    let closed = Arrivals::Closed { clients: 32 };
    let strip = |mut r: PhaseResult| {
        r.wall_seconds = 0.0;
        r.sim_queries_per_sec = 0.0;
        r
    };
    let mut by_load = Vec::new();
    for load in balancer::LoadKind::ALL {
        cfg.balancer.load = load;
        let a = simulate(&t, policy.as_ref(), &cfg, &Arrivals::Instant, &closed).unwrap();
        let b = simulate(&t, policy.as_ref(), &cfg, &Arrivals::Instant, &closed).unwrap();
        let (a, b) = (strip(a.test), strip(b.test));
        assert_eq!(a, b, "{load}");
        assert_eq!((a.ok, a.shed), (10_000, 0));
        by_load.push(a);
    }
    // Requests in flight with 32 clients over 8 replicas overflow far more often than the
    // window (the live system's 30–45% against the window's few percent).
    let (window, in_flight) = (&by_load[0], &by_load[2]);
    assert!(
        in_flight.overflow_share > 2.0 * window.overflow_share,
        "{} vs {}",
        in_flight.overflow_share,
        window.overflow_share
    );
}

#[test]
fn the_demo_phases_run_back_to_back() {
    use cache_sim::queueing::{simulate_live, LivePlan};
    // As `ballot demo` builds it: warm queries (the train part), then the closed-loop and
    // open-loop ones.
    let t = synthetic();
    let params = PolicyParams {
        term_bytes: Arc::new(t.term_bytes_map()),
        ..PolicyParams::new(8)
    };
    let policy = build_policy(PolicyKind::ChBl, &params).unwrap();
    let mut cfg = QueueConfig::new(8, t.capacity_for(0.05));
    cfg.replica.flash_read_mbps = Some(4.0);
    cfg.replica.cpu_us = 200.0;
    let mut plan = LivePlan {
        saturate: 6000,
        concurrency: 32,
        rate: 1.0,
    };
    // The demo's rate: 0.6 × the saturation throughput.
    let saturation = simulate_live(&t, Router::Policy(policy.as_ref()), &cfg, &plan)
        .unwrap()
        .saturate
        .throughput_qps;
    plan.rate = 0.6 * saturation;
    let p = simulate_live(&t, Router::Policy(policy.as_ref()), &cfg, &plan).unwrap();
    assert_eq!(p.saturate.throughput_qps, saturation);
    assert_eq!(
        (p.warm.ok, p.saturate.ok, p.steady.ok),
        (20_000, 6000, 4000)
    );
    assert!((p.steady.offered_qps.unwrap() / plan.rate - 1.0).abs() < 1e-9);
    // Closed loop at saturation keeps the replicas busier than the open loop below it.
    let busy = |r: &PhaseResult| r.utilisation.iter().sum::<f64>();
    assert!(busy(&p.saturate) > busy(&p.steady));
    assert!(p.steady.latency_ms.p99 >= p.steady.latency_ms.p50);
}

#[test]
fn per_shard_routing_with_one_load_blind_policy_per_shard_is_the_same_column() {
    use cache_sim::queueing::{simulate_live, LivePlan};
    // A policy that ignores load picks the same replica in every shard whether one
    // decision serves every shard or each shard decides for itself, so the two routers
    // must predict the same; the per-shard one must also take one policy per shard.
    let t = synthetic();
    let params = PolicyParams {
        term_bytes: Arc::new(t.term_bytes_map()),
        ..PolicyParams::new(4)
    };
    let a = build_policy(PolicyKind::QueryHash, &params).unwrap();
    let b = build_policy(PolicyKind::QueryHash, &params).unwrap();
    let mut cfg = QueueConfig::new(4, t.capacity_for(0.05) / 2);
    cfg.fanout = Fanout::Shards(2);
    cfg.replica.flash_read_mbps = Some(4.0);
    cfg.replica.cpu_us = 200.0;
    let plan = LivePlan {
        saturate: 4000,
        concurrency: 16,
        rate: 100.0,
    };
    let one = simulate_live(&t, Router::Policy(a.as_ref()), &cfg, &plan).unwrap();
    let each = simulate_live(&t, Router::PerShard(&[a.as_ref(), b.as_ref()]), &cfg, &plan).unwrap();
    assert_eq!(one.saturate.throughput_qps, each.saturate.throughput_qps);
    assert_eq!(one.steady.latency_ms.p99, each.steady.latency_ms.p99);
    assert_eq!(
        one.saturate.miss_bytes_ratio,
        each.saturate.miss_bytes_ratio
    );
    assert!(one.saturate.throughput_qps > 0.0);
    let err = simulate_live(&t, Router::PerShard(&[a.as_ref()]), &cfg, &plan).unwrap_err();
    assert!(err.to_string().contains("one per shard"), "{err}");
}

#[test]
fn several_balancers_route_on_their_own_views_or_with_the_reports() {
    use cache_sim::queueing::{simulate_live, LivePlan};
    let t = synthetic();
    let params = PolicyParams {
        term_bytes: Arc::new(t.term_bytes_map()),
        ..PolicyParams::new(8)
    };
    let mut cfg = QueueConfig::new(8, t.capacity_for(0.05));
    cfg.replica.flash_read_mbps = Some(4.0);
    cfg.replica.cpu_us = 200.0;
    cfg.balancer.load = balancer::LoadKind::InFlight;
    let plan = LivePlan {
        saturate: 4000,
        concurrency: 32,
        rate: 20.0,
    };
    let run_with = |kind: PolicyKind, count: usize, reports: bool| {
        let policy = build_policy(kind, &params).unwrap();
        let mut cfg = cfg.clone();
        cfg.balancer.count = count;
        cfg.balancer.reports = reports;
        simulate_live(&t, Router::Policy(policy.as_ref()), &cfg, &plan).unwrap()
    };
    let run = |kind: PolicyKind, count: usize| run_with(kind, count, false);
    // A policy blind to the load routes the same through one balancer or four.
    let (one, four) = (run(PolicyKind::QueryHash, 1), run(PolicyKind::QueryHash, 4));
    assert_eq!(one.saturate.throughput_qps, four.saturate.throughput_qps);
    assert_eq!(one.steady.latency_ms.p99, four.steady.latency_ms.p99);
    // Bounded loads on four partial views decide otherwise than on the whole one, and
    // every query is still answered.
    let (one, four) = (run(PolicyKind::ChBl, 1), run(PolicyKind::ChBl, 4));
    assert_ne!(one.saturate.overflow_share, four.saturate.overflow_share);
    assert_eq!((four.saturate.ok, four.steady.ok), (4000, 6000));
    // With the replicas' reports each balancer counts every balancer's requests in flight:
    // one balancer decides as before, four decide otherwise than on their own counts.
    let one_reports = run_with(PolicyKind::ChBl, 1, true);
    assert_eq!(
        one_reports.saturate.throughput_qps,
        one.saturate.throughput_qps
    );
    let four_reports = run_with(PolicyKind::ChBl, 4, true);
    assert_ne!(
        four_reports.saturate.overflow_share,
        four.saturate.overflow_share
    );
    // Only one policy's balancers are modelled.
    let mut pod = cfg.clone();
    pod.balancer.count = 2;
    assert!(pod.validate(&Router::PowerOfD { d: 2 }).is_err());
}

#[test]
fn late_binding_holds_queries_at_the_balancer_and_moves_one_that_waited_to_a_free_replica() {
    // Round-robin over 2 replicas, one slot each: b (3 ms) and a (1 ms) are sent, the
    // second a is held for b's replica. Held there, it reads a after b: done at 3.05 ms,
    // then 0.95 ms of a's read (the bucket refilled 3,050 bytes) and 0.05 ms of CPU.
    // Moved at 1.05 ms to the replica that just read a: a hit, done at 1.10 ms.
    let t = trace(&["b", "a", "a"]);
    let mut cfg = config(2);
    cfg.replica.flash_latency_us = 0.0;
    cfg.balancer.slots = 1;
    let held = run(&t, &cfg, Arrivals::Closed { clients: 3 });
    assert!(close(held.latency_ms.max, 4.05), "{}", held.latency_ms.max);
    assert_eq!(held.stolen_share, 0.0);
    assert_eq!(
        held.queue_max,
        vec![1, 1],
        "one slot: one query at a replica at once"
    );
    // Stealing after 5 ms: the held query gets its own replica at 3.05 ms first.
    cfg.balancer.steal_after = Some(0.005);
    let late = run(&t, &cfg, Arrivals::Closed { clients: 3 });
    assert_eq!(
        (late.stolen_share, late.latency_ms.max),
        (0.0, held.latency_ms.max)
    );
    cfg.balancer.steal_after = Some(0.0);
    let moved = run(&t, &cfg, Arrivals::Closed { clients: 3 });
    assert!(
        close(moved.stolen_share, 1.0 / 3.0),
        "{}",
        moved.stolen_share
    );
    assert!(
        close(moved.latency_ms.p50, 1.10),
        "{}",
        moved.latency_ms.p50
    );
    assert!(
        close(moved.latency_ms.max, 3.05),
        "{}",
        moved.latency_ms.max
    );
    assert_eq!((moved.ok, moved.miss_bytes_ratio), (3, 4000.0 / 5000.0));
    // Held queries need one policy's balancer: power of d choices has none.
    let err = Simulator::new(Some(&t), Router::PowerOfD { d: 2 }, &cfg).err();
    assert!(err.is_some_and(|e| e.to_string().contains("steal_after")));
}
