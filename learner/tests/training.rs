//! End-to-end training on a small synthetic log: refinement never returns a table worse on
//! validation than the initial one, the learned table beats term hashing on the held-out
//! test part, a table round-trips through Parquet, training is deterministic, and a
//! refinement that replays only the recent fit queries stays close to the full one, and
//! training from the fit part's distinct queries with counts (what an engine aggregates)
//! trains as good a table, and stable retraining keeps within its movement budget, and a
//! table over virtual homes serves its own replica count as trained and another about as
//! well as a table trained for it.

use std::sync::Arc;

use balancer::policy::PolicyKind;
use cache_sim::sim::{run_grid, GridConfig, PolicyLoads, Trace};
use data::sizes::{FreqTable, SizeModel, Sizes};
use data::split::Split;
use data::synth::{generate, SynthConfig};
use data::table::VotingTable;
use learner::train::{train_counted, CountedLog};
use learner::{train, TrainConfig, TrainOutput};

struct Setup {
    queries: Vec<String>,
    order: data::split::SplitOrder,
    sizes: Sizes,
}

fn setup() -> Setup {
    let log = generate(&SynthConfig {
        queries: 40_000,
        ..SynthConfig::default()
    });
    let order = Split::default().apply(log.queries.len(), |_| None).unwrap();
    Setup {
        sizes: Sizes::Model {
            freq: FreqTable::from_pairs(log.freq.clone()),
            model: SizeModel::default(),
        },
        queries: log.queries,
        order,
    }
}

fn run(s: &Setup) -> (TrainOutput, Trace) {
    run_with(s, 0.0)
}

fn run_with(s: &Setup, flash_price: f64) -> (TrainOutput, Trace) {
    run_tuned(s, |cfg| cfg.refine.flash_price = flash_price)
}

fn run_tuned(s: &Setup, tune: impl FnOnce(&mut TrainConfig)) -> (TrainOutput, Trace) {
    let trace = Trace::build(
        s.order
            .order
            .iter()
            .map(|&i| s.queries[i as usize].as_str()),
        s.order.train_len,
        &s.sizes,
    );
    let mut cfg = config(&trace);
    tune(&mut cfg);
    let out = train(&train_queries(s), &s.sizes, &cfg, |_| {}, |_| {}).unwrap();
    (out, trace)
}

/// The train part, in evaluation order.
fn train_queries(s: &Setup) -> Vec<&str> {
    s.order
        .train()
        .iter()
        .map(|&i| s.queries[i as usize].as_str())
        .collect()
}

/// The tests' training setup: R = 4, 5% caches, 12 iterations, a 2,000-query window.
fn config(trace: &Trace) -> TrainConfig {
    let mut cfg = TrainConfig::new(4, 0.05, trace.capacity_for(0.05));
    cfg.refine.iterations = 12;
    cfg.window = 2_000;
    cfg
}

/// Fails unless `table` is within 0.02 miss bytes ratio of `reference` on the test part.
fn assert_close_on_test(trace: &Trace, reference: &VotingTable, table: &VotingTable, what: &str) {
    let (a, b) = (
        on_test(trace, reference).miss_bytes_ratio,
        on_test(trace, table).miss_bytes_ratio,
    );
    assert!(
        (a - b).abs() <= 0.02,
        "{what} {b:.4} against {a:.4} on the test part"
    );
}

#[test]
fn training_refines_generalizes_round_trips_and_repeats() {
    let s = setup();
    let (out, trace) = run(&s);
    let r = &out.report;

    // Refinement keeps the best validation table, never a worse one than the initial.
    let initial = r.iterations[0].validation_miss_bytes_ratio;
    let best = r
        .iterations
        .iter()
        .map(|i| i.validation_miss_bytes_ratio)
        .fold(f64::INFINITY, f64::min);
    assert!(r.validation_miss_bytes_ratio <= initial);
    assert_eq!(r.validation_miss_bytes_ratio, best);
    // And it earns its keep: a refinement that changes nothing keeps iteration 0 and fails.
    assert!(
        r.validation_miss_bytes_ratio <= 0.98 * initial,
        "refinement: {} is not 2% below the initial {initial}",
        r.validation_miss_bytes_ratio
    );
    assert_eq!(
        r.iterations[r.best_iteration].validation_miss_bytes_ratio,
        best
    );
    assert!(
        r.prune.terms_kept < r.prune.terms_seen,
        "rare terms are pruned"
    );

    // On the held-out test part the table beats term hashing.
    let grid = run_grid(
        &trace,
        &GridConfig {
            replicas: 4,
            cache_fracs: vec![0.05],
            policies: vec![
                PolicyKind::TermVote,
                PolicyKind::Table,
                PolicyKind::RoundRobin,
            ],
            eviction: eviction::EvictionKind::Lru,
            eps: 0.05,
            window: 2_000,
            seed: 1,
            table: Some(Arc::new(out.table.clone())),
            loads: PolicyLoads::uniform(Default::default()),
            homes: balancer::policy::DEFAULT_HOMES,
            evidence: balancer::policy::DEFAULT_EVIDENCE,
            admission: None,
        },
    )
    .unwrap();
    let mbr = |p: &str| {
        grid.results
            .iter()
            .find(|x| x.policy == p)
            .unwrap()
            .sim
            .miss_bytes_ratio
    };
    assert!(
        mbr("table") < mbr("term-vote"),
        "{} vs {}",
        mbr("table"),
        mbr("term-vote")
    );
    assert!(mbr("term-vote") < mbr("round-robin"));

    // Round trip through Parquet, metadata included.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("table.parquet");
    out.table.write_parquet(&path).unwrap();
    let back = VotingTable::read_parquet(&path, Some(4)).unwrap();
    assert_eq!(back.rows, out.table.rows);
    for (k, v) in &out.table.metadata {
        assert_eq!(back.metadata.get(k), Some(v), "metadata {k}");
    }
    assert_eq!(
        back.metadata.get("ballot.train.log_digest"),
        Some(&r.log_digest)
    );

    // A second run with the same seed learns the same table (timings aside).
    let (again, _) = run(&s);
    assert_eq!(again.table.rows, out.table.rows);
    let stable = |t: &VotingTable| {
        t.metadata
            .iter()
            .filter(|(k, _)| !k.starts_with("ballot.train.seconds."))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(stable(&again.table), stable(&out.table));
    assert_eq!(again.report.iterations, out.report.iterations);
}

#[test]
fn a_sampled_refinement_replays_the_recent_fit_queries_and_stays_close() {
    let s = setup();
    let (full, trace) = run(&s);
    let (sampled, _) = run_tuned(&s, |cfg| cfg.replay_fit_max = Some(8_000));
    let (f, p) = (&full.report, &sampled.report);
    assert_eq!(f.replayed_fit_queries, f.fit_queries);
    assert_eq!(p.fit_queries, f.fit_queries);
    assert_eq!(p.replayed_fit_queries, 8_000);
    // The graph still covers the whole fit part (the chosen pruning may differ).
    assert_eq!(
        (p.prune.terms_seen, p.prune.queries_seen),
        (f.prune.terms_seen, f.prune.queries_seen)
    );
    assert_ne!(sampled.table.rows, full.table.rows, "less was replayed");
    assert!(
        p.validation_miss_bytes_ratio <= 0.98 * p.iterations[0].validation_miss_bytes_ratio,
        "the sampled refinement still refines: {} against the initial {}",
        p.validation_miss_bytes_ratio,
        p.iterations[0].validation_miss_bytes_ratio
    );
    assert_close_on_test(&trace, &full.table, &sampled.table, "sampled refinement");
}

#[test]
fn training_from_counts_sees_the_same_fit_part_and_trains_as_well() {
    // The fit part handed over as distinct texts with counts (sorted by text, as the
    // engines give them), every fit record replayed, the same validation records.
    let s = setup();
    let (full, trace) = run_tuned(&s, |cfg| cfg.replay_fit_max = None);
    let train_q = train_queries(&s);
    let fit_len = full.report.fit_queries as usize;
    let mut counts: std::collections::BTreeMap<&str, u64> = Default::default();
    for q in &train_q[..fit_len] {
        *counts.entry(q).or_default() += 1;
    }
    let fit_counts: Vec<(&str, u64)> = counts.into_iter().collect();
    let log = CountedLog {
        fit_counts: &fit_counts,
        replay: &train_q[..fit_len],
        validation: &train_q[fit_len..],
    };
    let mut cfg = config(&trace);
    cfg.replay_fit_max = None;
    let counted = train_counted(&log, &s.sizes, &cfg, |_| {}, |_| {}).unwrap();
    let (f, c) = (&full.report, &counted.report);
    assert_eq!(c.fit_queries, f.fit_queries);
    assert_eq!(c.replayed_fit_queries, f.fit_queries);
    assert_eq!(c.validation_queries, f.validation_queries);
    assert_eq!(c.prune.terms_seen, f.prune.terms_seen);
    assert_eq!(c.prune.queries_seen, f.prune.queries_seen);
    // Same inputs, another order of the graph's query vertices: a table as good.
    assert_close_on_test(&trace, &full.table, &counted.table, "trained from counts");
    // Deterministic: the same counts give the same table.
    let again = train_counted(&log, &s.sizes, &cfg, |_| {}, |_| {}).unwrap();
    assert_eq!(again.table.rows, counted.table.rows);
}

/// The `table` policy with `table` over the test part (R = 4, 5% caches).
fn on_test(trace: &Trace, table: &VotingTable) -> cache_sim::sim::SimResult {
    on_test_at(trace, table, 4)
}

/// The `table` policy with `table` over the test part on `replicas` replicas (5% caches).
fn on_test_at(trace: &Trace, table: &VotingTable, replicas: usize) -> cache_sim::sim::SimResult {
    let grid = run_grid(
        trace,
        &GridConfig {
            replicas,
            cache_fracs: vec![0.05],
            policies: vec![PolicyKind::Table],
            eviction: eviction::EvictionKind::Lru,
            eps: 0.05,
            window: 2_000,
            seed: 1,
            table: Some(Arc::new(table.clone())),
            loads: PolicyLoads::uniform(Default::default()),
            homes: balancer::policy::DEFAULT_HOMES,
            evidence: balancer::policy::DEFAULT_EVIDENCE,
            admission: None,
        },
    )
    .unwrap();
    grid.results.into_iter().next().unwrap().sim
}

/// The table's busiest replica's share of the flash bytes read over the test part.
fn busiest_flash_share(trace: &Trace, table: &VotingTable) -> f64 {
    on_test(trace, table)
        .flash_shares
        .iter()
        .copied()
        .fold(0.0, f64::max)
}

#[test]
fn a_table_over_virtual_homes_votes_as_trained_on_its_replicas_and_balances_on_more() {
    use balancer::policy::table::TableVotes;
    use balancer::virtual_homes::for_replicas;
    let s = setup();
    let (plain, trace) = run(&s);
    let (homes, _) = run_tuned(&s, |cfg| cfg.virtual_homes = Some(16));
    assert_eq!(homes.table.replicas, 64);
    let vh = homes.table.virtual_homes().unwrap().unwrap();
    assert_eq!((vh.replicas, vh.trained.len()), (4, 64));
    assert_eq!(vh.trained[15..17], [0, 1]);
    let report = homes.report.virtual_homes.as_ref().unwrap();
    // On the 4 replicas it was trained for, it votes exactly as the plain table.
    let tb = Arc::new(trace.term_bytes_map());
    let votes = |t: &VotingTable, r| TableVotes::build(t, r, Arc::clone(&tb)).unwrap();
    assert_eq!(
        votes(&homes.table, 4).content_hash(),
        votes(&plain.table, 4).content_hash()
    );
    // On 6 replicas it reads about what a table trained for 6 reads, its busiest replica
    // no more, without a retrain.
    let six = for_replicas(&homes.table, 6).unwrap().unwrap();
    let (trained6, _) = run_tuned(&s, |cfg| cfg.replicas = 6);
    let (mapped, trained) = (
        on_test_at(&trace, &six, 6),
        on_test_at(&trace, &trained6.table, 6),
    );
    let busiest =
        |r: &cache_sim::sim::SimResult| r.flash_shares.iter().copied().fold(0.0, f64::max);
    assert!(
        mapped.miss_bytes_ratio <= 1.10 * trained.miss_bytes_ratio,
        "mapped onto 6: {} against {} trained for 6",
        mapped.miss_bytes_ratio,
        trained.miss_bytes_ratio
    );
    assert!(
        busiest(&mapped) <= 1.2 * busiest(&trained),
        "busiest flash share mapped onto 6: {:?}, trained for 6: {:?}",
        mapped.flash_shares,
        trained.flash_shares
    );
    assert!(report.heaviest_work_share > 0.0 && report.homes == 64);
}

#[test]
fn a_flash_price_spreads_the_flash_reads() {
    let s = setup();
    let (plain, trace) = run_with(&s, 0.0);
    let (priced, _) = run_with(&s, 1.0);
    let (a, b) = (
        busiest_flash_share(&trace, &plain.table),
        busiest_flash_share(&trace, &priced.table),
    );
    assert!(
        b < a,
        "with a flash price the busiest replica should read a smaller share: {b} vs {a}"
    );
}

#[test]
fn stable_retraining_keeps_within_its_movement_budget_and_a_fresh_table_does_not() {
    use cache_sim::sim::movement::{movement, requested_by_term, top_votes};
    let s = setup();
    let queries = train_queries(&s);
    // The served table learned on the older half of the train part; the new one on the
    // newer half, as a retrain learns on the days since.
    let (older, newer) = queries.split_at(queries.len() / 2);
    let probe = Trace::build(older.iter().copied(), older.len(), &s.sizes);
    let served = Arc::new(
        train(older, &s.sizes, &config(&probe), |_| {}, |_| {})
            .unwrap()
            .table,
    );
    let trace = Trace::build(newer.iter().copied(), newer.len(), &s.sizes);
    let moved = |table: &VotingTable| {
        movement(
            &top_votes(&trace, &served),
            &top_votes(&trace, table),
            &requested_by_term(&trace, 0..trace.len()),
        )
    };
    let fresh = train(newer, &s.sizes, &config(&trace), |_| {}, |_| {}).unwrap();
    assert_eq!(fresh.report.movement, None);
    let fresh_moved = moved(&fresh.table).share();
    for max_move in [0.0, 0.1] {
        let mut cfg = config(&trace);
        cfg.stable = Some(learner::Stable {
            served: Arc::clone(&served),
            max_move,
        });
        let out = train(newer, &s.sizes, &cfg, |_| {}, |_| {}).unwrap();
        let m = moved(&out.table);
        assert!(
            m.share() <= max_move,
            "budget {max_move}: moved {:.4} (fresh {fresh_moved:.4})",
            m.share()
        );
        assert_eq!(
            out.report.movement,
            Some(m),
            "the report's figure is the tables'"
        );
        assert_eq!(
            out.table.metadata["ballot.train.moved_share"],
            format!("{:.6}", m.share())
        );
        if max_move > 0.0 {
            // The budget binds: without it the new table moves several times as much.
            assert!(fresh_moved > 3.0 * max_move, "fresh moved {fresh_moved:.4}");
            assert!(
                m.share() > 0.5 * max_move,
                "the budget is spent where it pays: {m:?}"
            );
        }
    }
}
