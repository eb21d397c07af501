//! The whole training job: aggregate the fit part of the train queries, build the term–query
//! graph, partition it with METIS (once per candidate imbalance tolerance), turn the parts
//! into votes, refine each candidate by simulation with early stopping on a validation
//! slice, and return the best table with its report. Every
//! step is deterministic for a fixed seed.

use std::collections::BTreeMap;
use std::time::Instant;

use balancer::policy::PolicyParams;
use cache_sim::sim::movement::{movement, top_votes};
use cache_sim::sim::{SimConfig, SimLoad, Trace};
use data::hash::{mix64, term_hash};
use data::sizes::Sizes;
use data::table::VotingTable;
use eviction::EvictionKind;
use std::sync::{Arc, Mutex};

use crate::aggregate::{aggregate, aggregate_weighted};
use crate::graph::{build_graph, GraphError};
use crate::partition::{partition, Partition, PartitionError};
use crate::refine::{objective, refine, IterationRecord, RefineConfig, Refined};
use crate::report::{CandidateRecord, GraphStats, StageTime, TrainReport, VirtualHomesReport};
use crate::stable::{stable_start, Budget};
use crate::votes::TermVotes;

/// Default of [`TrainConfig::replay_fit_max`]: logs with a fit part up to this size (the
/// standard AOL evaluation's is 0.4 million) replay all of it.
pub const DEFAULT_REPLAY_FIT_MAX: usize = 2_000_000;

/// What to train.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainConfig {
    /// Replica count R.
    pub replicas: usize,
    /// Per-replica cache size as a fraction of the log's distinct postings bytes (recorded).
    pub cache_frac: f64,
    /// Per-replica cache capacity in bytes (the caller computes it from `cache_frac` the way
    /// `ballot eval` does).
    pub capacity_bytes: u64,
    /// Eviction policy of the simulated caches.
    pub eviction: EvictionKind,
    /// Load-bound slack.
    pub eps: f64,
    /// Load window of the simulator, in queries.
    pub window: usize,
    /// What the simulator's load window counts (queries or work); the table is trained
    /// under the bound it will be served with.
    pub load: SimLoad,
    /// The home share the table will be served with (`balancer::policy::vote`).
    pub homes: f64,
    /// Seed of METIS and of the simulator's random choices.
    pub seed: u64,
    /// Minimum train-query frequencies to try: terms in fewer train queries are pruned
    /// (they abstain). Each value is a separate candidate graph.
    pub min_term_freqs: Vec<u32>,
    /// METIS imbalance tolerances (thousandths) to try: each gives one partition, refined
    /// separately; the candidate best on validation wins. The refined outcome depends a
    /// lot on the starting partition, so a few restarts buy robustness.
    pub ufactors: Vec<i32>,
    /// Share of the train queries (the tail) held out for validation.
    pub validation_frac: f64,
    /// Refinement parameters.
    pub refine: RefineConfig,
    /// Replay at most this many fit queries per refinement iteration, the most recent
    /// ones (None: all). The aggregate and the graph still cover the whole fit part; on a
    /// long log this sample bounds the refinement's time (docs/learner.md measures the
    /// error it costs).
    pub replay_fit_max: Option<usize>,
    /// Stable retraining: keep the served table's homes, moving at most a share of the
    /// requested bytes ([`crate::stable`]). None: train from scratch.
    pub stable: Option<Stable>,
    /// Split each replica into this many virtual homes ([`crate::virtual_homes`]), so the
    /// table serves other replica counts. None: a plain table for `replicas` only.
    pub virtual_homes: Option<u16>,
}

/// What stable retraining keeps: the served table, and the share of the train queries'
/// requested bytes whose top vote may move from it.
#[derive(Clone, Debug, PartialEq)]
pub struct Stable {
    /// The table the balancers serve.
    pub served: Arc<VotingTable>,
    /// At most this share of the requested bytes moves (0 to 1).
    pub max_move: f64,
}

impl TrainConfig {
    /// The standard setup for `replicas` and a capacity.
    pub fn new(replicas: usize, cache_frac: f64, capacity_bytes: u64) -> Self {
        TrainConfig {
            replicas,
            cache_frac,
            capacity_bytes,
            eviction: EvictionKind::Lru,
            eps: balancer::policy::DEFAULT_EPS,
            window: cache_sim::sim::replay::DEFAULT_WINDOW,
            load: SimLoad::Queries,
            homes: balancer::policy::DEFAULT_HOMES,
            seed: 1,
            min_term_freqs: vec![2, 3],
            ufactors: vec![10, 30, 60],
            validation_frac: 0.1,
            refine: RefineConfig::default(),
            replay_fit_max: Some(DEFAULT_REPLAY_FIT_MAX),
            stable: None,
            virtual_homes: None,
        }
    }
}

/// Why training failed.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// Bad configuration.
    #[error("invalid training configuration: {0}")]
    Config(String),
    /// The graph could not be built.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// METIS failed.
    #[error(transparent)]
    Partition(#[from] PartitionError),
    /// Building or simulating a table failed.
    #[error("refinement failed: {0}")]
    Refine(String),
    /// Splitting the replicas into virtual homes failed.
    #[error("splitting into virtual homes failed: {0}")]
    VirtualHomes(#[from] crate::virtual_homes::SplitError),
}

/// One refined candidate: a graph (by index), a METIS imbalance, and how long it took.
struct Candidate {
    graph: usize,
    ufactor: i32,
    parts: Partition,
    refined: Refined,
    partition_secs: f64,
    refine_secs: f64,
}

/// A trained table and its report.
pub struct TrainOutput {
    /// The voting table, metadata included.
    pub table: VotingTable,
    /// The report.
    pub report: TrainReport,
}

/// Stable digest of a query sequence.
pub fn digest<'a>(queries: impl IntoIterator<Item = &'a str>) -> String {
    let d = queries
        .into_iter()
        .fold(0x9e37_79b9_7f4a_7c15u64, |acc, q| mix64(acc ^ term_hash(q)));
    format!("{d:016x}")
}

/// What a candidate is doing, for progress reports (candidates run in parallel, so events
/// of different candidates interleave; each names its candidate).
#[derive(Clone, Debug)]
pub enum Progress<'a> {
    /// METIS starts partitioning a candidate's graph.
    Partitioning {
        /// The candidate's pruning threshold.
        min_term_freq: u32,
        /// The candidate's METIS imbalance tolerance.
        ufactor: i32,
        /// Vertices of the graph.
        vertices: usize,
    },
    /// METIS finished.
    Partitioned {
        /// The candidate's pruning threshold.
        min_term_freq: u32,
        /// The candidate's METIS imbalance tolerance.
        ufactor: i32,
        /// Seconds METIS took.
        seconds: f64,
        /// Its edge cut.
        edge_cut: i64,
    },
    /// A refinement iteration finished.
    Iteration(&'a IterationRecord),
}

/// Trains a table on `queries` (the train part, in evaluation order). `on_stage` hears
/// each finished stage, `on_progress` each candidate's METIS run and refinement
/// iterations.
pub fn train(
    queries: &[&str],
    sizes: &Sizes,
    cfg: &TrainConfig,
    mut on_stage: impl FnMut(&StageTime),
    on_progress: impl FnMut(&Progress<'_>) + Send,
) -> Result<TrainOutput, TrainError> {
    check(cfg)?;
    let t0 = Instant::now();
    let fit_len = ((queries.len() as f64) * (1.0 - cfg.validation_frac)).floor() as usize;
    let trace = Trace::build(queries.iter().copied(), fit_len, sizes);
    let tokenize = stage_time("tokenize", t0);
    on_stage(&tokenize);
    // The refinement replays the most recent `replay_fit_max` fit queries (all of them when
    // the fit part is shorter), then the whole validation part.
    let replay_from = match cfg.replay_fit_max {
        Some(max) if fit_len > max => fit_len - max,
        _ => 0,
    };
    let input = Prepared {
        trace,
        graph_len: fit_len,
        weights: None,
        replay_from,
        fit_queries: fit_len as u64,
        validation_queries: (queries.len() - fit_len) as u64,
        log_digest: digest(queries.iter().copied()),
    };
    train_prepared(input, cfg, vec![tokenize], on_stage, on_progress)
}

/// The train part of a log aggregated elsewhere (`ballot train --engine`): the fit part as
/// distinct texts with their record counts, and the records the refinement replays.
pub struct CountedLog<'a> {
    /// Distinct fit texts with their counts, in a fixed order (the table depends on it).
    pub fit_counts: &'a [(&'a str, u64)],
    /// The most recent fit records, in log order, replayed by the refinement (a sample of
    /// at most [`TrainConfig::replay_fit_max`] of them is enough).
    pub replay: &'a [&'a str],
    /// The validation records, in log order, newer than every fit record.
    pub validation: &'a [&'a str],
}

/// Trains a table from an aggregated fit part: the graph and METIS see every distinct fit
/// query with its count, the refinement replays `log.replay` then `log.validation`. The
/// same counts in the same order give the same table, whichever engine counted them.
/// `cfg.validation_frac` is not used: the caller chose the validation records.
pub fn train_counted(
    log: &CountedLog<'_>,
    sizes: &Sizes,
    cfg: &TrainConfig,
    mut on_stage: impl FnMut(&StageTime),
    on_progress: impl FnMut(&Progress<'_>) + Send,
) -> Result<TrainOutput, TrainError> {
    check(cfg)?;
    if cfg.stable.is_some() {
        return Err(TrainError::Config(
            "stable retraining counts the requested bytes of every train record, so it needs \
             the records, not their counts"
                .into(),
        ));
    }
    let t0 = Instant::now();
    let distinct = log.fit_counts.len();
    let replay = match cfg.replay_fit_max {
        Some(max) if log.replay.len() > max => &log.replay[log.replay.len() - max..],
        _ => log.replay,
    };
    let texts = log
        .fit_counts
        .iter()
        .map(|&(q, _)| q)
        .chain(replay.iter().copied())
        .chain(log.validation.iter().copied());
    let trace = Trace::build(texts, distinct + replay.len(), sizes);
    let tokenize = stage_time("tokenize", t0);
    on_stage(&tokenize);
    let weights: Vec<u32> = log
        .fit_counts
        .iter()
        .map(|&(_, c)| u32::try_from(c).unwrap_or(u32::MAX))
        .collect();
    let input = Prepared {
        trace,
        graph_len: distinct,
        weights: Some(weights),
        replay_from: distinct,
        fit_queries: log.fit_counts.iter().map(|&(_, c)| c).sum(),
        validation_queries: log.validation.len() as u64,
        log_digest: digest_counts(log.fit_counts),
    };
    train_prepared(input, cfg, vec![tokenize], on_stage, on_progress)
}

/// Stable digest of distinct texts with their counts.
pub fn digest_counts(counts: &[(&str, u64)]) -> String {
    let d = counts
        .iter()
        .fold(0x9e37_79b9_7f4a_7c15u64, |acc, &(q, c)| {
            mix64(mix64(acc ^ term_hash(q)) ^ c)
        });
    format!("{d:016x}")
}

/// What the candidates are trained on, however the train part was read.
struct Prepared {
    /// Graph queries first (`0..graph_len`), then the replayed fit queries and the
    /// validation part; `trace.train_len` ends the fit queries.
    trace: Trace,
    /// Queries the graph aggregates.
    graph_len: usize,
    /// Record count of each graph query (None: each is one record).
    weights: Option<Vec<u32>>,
    /// First query the refinement replays.
    replay_from: usize,
    /// Fit records (reported).
    fit_queries: u64,
    /// Validation records (reported).
    validation_queries: u64,
    /// Digest of the train part (table metadata).
    log_digest: String,
}

fn check(cfg: &TrainConfig) -> Result<(), TrainError> {
    if cfg.replicas == 0 || cfg.replicas > balancer::load::MAX_REPLICAS {
        return Err(TrainError::Config(format!(
            "replicas must be in 1..={}",
            balancer::load::MAX_REPLICAS
        )));
    }
    if !(0.0..1.0).contains(&cfg.validation_frac) {
        return Err(TrainError::Config(
            "validation fraction must be in [0, 1)".into(),
        ));
    }
    if let Some(s) = &cfg.stable {
        if !(s.max_move.is_finite() && (0.0..=1.0).contains(&s.max_move)) {
            return Err(TrainError::Config(format!(
                "the movement budget {} is not in [0, 1]",
                s.max_move
            )));
        }
        if usize::from(s.served.replicas) != cfg.replicas {
            return Err(TrainError::Config(format!(
                "the served table has {} replicas, the new one {}",
                s.served.replicas, cfg.replicas
            )));
        }
    }
    if let Some(k) = cfg.virtual_homes {
        let homes = cfg.replicas * usize::from(k);
        if k < 2 || homes > crate::virtual_homes::MAX_HOMES {
            return Err(TrainError::Config(format!(
                "{k} virtual homes per replica: need at least 2, and at most {} homes in all",
                crate::virtual_homes::MAX_HOMES
            )));
        }
    }
    if cfg.ufactors.is_empty() || cfg.min_term_freqs.is_empty() {
        return Err(TrainError::Config(
            "at least one METIS ufactor and one minimum term frequency are needed".into(),
        ));
    }
    Ok(())
}

fn stage_time(name: &str, started: Instant) -> StageTime {
    StageTime {
        stage: name.to_owned(),
        seconds: started.elapsed().as_secs_f64(),
    }
}

fn train_prepared(
    input: Prepared,
    cfg: &TrainConfig,
    mut timings: Vec<StageTime>,
    mut on_stage: impl FnMut(&StageTime),
    on_progress: impl FnMut(&Progress<'_>) + Send,
) -> Result<TrainOutput, TrainError> {
    let replicas = u16::try_from(cfg.replicas).map_err(|e| TrainError::Config(e.to_string()))?;
    let Prepared {
        trace,
        graph_len,
        weights,
        replay_from,
        fit_queries,
        validation_queries,
        log_digest,
    } = input;
    let sim = SimConfig {
        admission: None,
        replicas: cfg.replicas,
        capacity_bytes: cfg.capacity_bytes,
        eviction: cfg.eviction,
        window: cfg.window,
        seed: cfg.seed,
        load: cfg.load,
    };
    // The table is learned alone, as the prior the balancer adds its shadow caches'
    // evidence to.
    let params = PolicyParams {
        eps: cfg.eps,
        homes: cfg.homes,
        evidence: 0.0,
        term_bytes: Arc::new(trace.term_bytes_map()),
        ..PolicyParams::new(cfg.replicas)
    };
    let replay_trace;
    let replayed: &Trace = if replay_from > 0 {
        replay_trace = trace.suffix(replay_from);
        &replay_trace
    } else {
        &trace
    };
    let budget = cfg
        .stable
        .as_ref()
        .map(|s| Budget::new(&trace, &s.served, s.max_move));
    let mut graphs = Vec::new();
    let (mut agg_secs, mut graph_secs) = (0.0, 0.0);
    for &min_term_freq in &cfg.min_term_freqs {
        let t0 = Instant::now();
        let agg = match &weights {
            None => aggregate(&trace, graph_len, min_term_freq),
            Some(w) => aggregate_weighted(&trace, graph_len, |q| w[q], min_term_freq),
        };
        agg_secs += t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let graph = build_graph(&trace, &agg)?;
        graph_secs += t0.elapsed().as_secs_f64();
        graphs.push((min_term_freq, agg, graph));
    }
    // Every (graph, METIS imbalance) pair is a candidate; each is deterministic, and the
    // choice below walks them in a fixed order. METIS runs one partition at a time
    // (`partition`), so one thread partitions the candidates in turn and hands each to the
    // pool to refine while it partitions the next; after the last it refines too.
    let jobs: Vec<(usize, i32)> = (0..graphs.len())
        .flat_map(|g| cfg.ufactors.iter().map(move |&u| (g, u)))
        .collect();
    let on_progress = Mutex::new(on_progress);
    let tell = |event: &Progress<'_>| {
        let mut hear = on_progress.lock().unwrap_or_else(|e| e.into_inner());
        hear(event)
    };
    let refine_candidate = |g: usize, ufactor: i32, parts: Partition, partition_secs: f64| {
        let (min_term_freq, _, graph) = &graphs[g];
        let min_term_freq = *min_term_freq;
        let initial = match &budget {
            Some(b) => stable_start(&trace, graph, &parts, replicas, b),
            None => TermVotes::from_partition(&trace, graph, &parts, replicas),
        };
        let t0 = Instant::now();
        let mut refined = refine(
            replayed,
            initial,
            &sim,
            &params,
            &cfg.refine,
            budget.as_ref(),
            |rec| {
                tell(&Progress::Iteration(&IterationRecord {
                    min_term_freq,
                    ufactor,
                    ..rec.clone()
                }))
            },
        )
        .map_err(TrainError::Refine)?;
        for rec in &mut refined.history {
            rec.min_term_freq = min_term_freq;
            rec.ufactor = ufactor;
        }
        Ok(Candidate {
            graph: g,
            ufactor,
            parts,
            refined,
            partition_secs,
            refine_secs: t0.elapsed().as_secs_f64(),
        })
    };
    let slots: Vec<Mutex<Option<Result<Candidate, TrainError>>>> =
        jobs.iter().map(|_| Mutex::new(None)).collect();
    let t_candidates = Instant::now();
    rayon::scope(|scope| {
        for (slot, &(g, ufactor)) in slots.iter().zip(&jobs) {
            let (min_term_freq, _, graph) = &graphs[g];
            let min_term_freq = *min_term_freq;
            tell(&Progress::Partitioning {
                min_term_freq,
                ufactor,
                vertices: graph.term_ids.len() + graph.queries,
            });
            let t0 = Instant::now();
            let parts = match partition(graph, cfg.replicas, ufactor, cfg.seed) {
                Ok(parts) => parts,
                Err(e) => {
                    *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(Err(e.into()));
                    continue;
                }
            };
            let partition_secs = t0.elapsed().as_secs_f64();
            tell(&Progress::Partitioned {
                min_term_freq,
                ufactor,
                seconds: partition_secs,
                edge_cut: parts.edge_cut,
            });
            let refine_candidate = &refine_candidate;
            scope.spawn(move |_| {
                let outcome = refine_candidate(g, ufactor, parts, partition_secs);
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
            });
        }
    });
    let outcomes: Vec<Result<Candidate, TrainError>> = slots
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .unwrap_or_else(|| Err(TrainError::Config("a candidate did not finish".into())))
        })
        .collect();
    let candidates_secs = t_candidates.elapsed().as_secs_f64();
    let mut candidates = Vec::new();
    let mut chosen: Option<Candidate> = None;
    let (mut partition_secs, mut refine_secs) = (0.0, 0.0);
    for outcome in outcomes {
        let c = outcome?;
        partition_secs += c.partition_secs;
        refine_secs += c.refine_secs;
        candidates.push(CandidateRecord {
            min_term_freq: graphs[c.graph].0,
            ufactor: c.ufactor,
            edge_cut: c.parts.edge_cut,
            best_iteration: c.refined.best_iteration,
            validation_miss_bytes_ratio: c.refined.best_result.miss_bytes_ratio,
        });
        let price = cfg.refine.flash_price;
        let better = chosen.as_ref().is_none_or(|b| {
            objective(&c.refined.best_result, price) < objective(&b.refined.best_result, price)
        });
        if better {
            chosen = Some(c);
        }
    }
    let Some(Candidate {
        graph: g,
        ufactor,
        parts,
        refined,
        ..
    }) = chosen
    else {
        return Err(TrainError::Config("no candidate was trained".into()));
    };
    let (min_term_freq, agg, graph) = &graphs[g];
    let min_term_freq = *min_term_freq;
    // `partition` and `refine` sum the candidates' own times (they overlap when run in
    // parallel); `candidates` is their wall time.
    for (name, seconds) in [
        ("aggregate", agg_secs),
        ("graph", graph_secs),
        ("partition", partition_secs),
        ("refine", refine_secs),
        ("candidates", candidates_secs),
    ] {
        let t = StageTime {
            stage: name.to_owned(),
            seconds,
        };
        on_stage(&t);
        timings.push(t);
    }

    let mut part_load = vec![0f64; cfg.replicas];
    for (qi, q) in agg.queries.iter().enumerate() {
        part_load[parts.part[graph.term_ids.len() + qi] as usize] += f64::from(q.count);
    }
    let load_total: f64 = part_load.iter().sum();
    let mut report = TrainReport {
        replicas: cfg.replicas,
        cache_frac: cfg.cache_frac,
        capacity_bytes: cfg.capacity_bytes,
        eviction: cfg.eviction.name().to_owned(),
        eps: cfg.eps,
        seed: cfg.seed,
        fit_queries,
        replayed_fit_queries: replayed.train_len as u64,
        validation_queries,
        prune: agg.prune.clone(),
        graph: GraphStats {
            term_vertices: graph.term_ids.len() as u64,
            query_vertices: graph.queries as u64,
            edges: graph.edges() as u64,
            edge_cut: parts.edge_cut,
            part_load_share: part_load
                .iter()
                .map(|l| {
                    if load_total > 0.0 {
                        l / load_total
                    } else {
                        0.0
                    }
                })
                .collect(),
        },
        timings,
        candidates,
        chosen_min_term_freq: min_term_freq,
        chosen_ufactor: ufactor,
        iterations: refined.history.clone(),
        best_iteration: refined.best_iteration,
        validation_miss_bytes_ratio: refined.best_result.miss_bytes_ratio,
        validation_imbalance: refined.best_result.imbalance,
        voting_terms: refined.best.voting_terms() as u64,
        log_digest,
        movement: None,
        virtual_homes: None,
    };
    let mut table = refined
        .best
        .to_table(&trace, metadata(&report))
        .map_err(|e| TrainError::Refine(e.to_string()))?;
    if let Some(b) = &budget {
        let m = movement(&b.homes, &top_votes(&trace, &table), &b.cost);
        table.metadata.insert(
            "ballot.train.moved_share".into(),
            format!("{:.6}", m.share()),
        );
        report.movement = Some(m);
    }
    if let Some(k) = cfg.virtual_homes {
        let t0 = Instant::now();
        let run = crate::virtual_homes::WorkReplay {
            trace: replayed,
            sim: &sim,
            params: &params,
        };
        let (votes, mut homes) =
            crate::virtual_homes::split(&trace, agg, &refined.best, k, cfg.seed, &run)?;
        let mut metadata = table.metadata.clone();
        homes.insert_into(&mut metadata);
        table = votes
            .to_table(&trace, metadata)
            .map_err(|e| TrainError::Refine(e.to_string()))?;
        // The work on every count from half to twice the replicas, as the balancer maps
        // the homes there.
        let most = homes.homes().min(balancer::load::MAX_REPLICAS);
        let counts: Vec<usize> = (cfg.replicas.div_ceil(2)..=(2 * cfg.replicas).min(most))
            .filter(|&n| n != cfg.replicas)
            .collect();
        let price = cfg.refine.flash_price;
        let score = move |r: &cache_sim::sim::SimResult| objective(r, price);
        let measured = crate::virtual_homes::measure_counts(
            &table, &votes, &mut homes, &run, &counts, &score,
        )?;
        homes.insert_into(&mut table.metadata);
        let total: u64 = homes.work.iter().sum();
        let heaviest = homes.work.iter().copied().max().unwrap_or(0);
        report.virtual_homes = Some(VirtualHomesReport {
            per_replica: k,
            homes: homes.homes(),
            heaviest_work_share: if total > 0 {
                heaviest as f64 / total as f64
            } else {
                0.0
            },
            measured,
        });
        let t = stage_time("virtual homes", t0);
        on_stage(&t);
        report.timings.push(t);
    }
    Ok(TrainOutput { table, report })
}

/// The table metadata summarizing `report` (keys `ballot.train.*`).
fn metadata(report: &TrainReport) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        m.insert(format!("ballot.train.{k}"), v);
    };
    put("cache_frac", report.cache_frac.to_string());
    put("capacity_bytes", report.capacity_bytes.to_string());
    put("eviction", report.eviction.clone());
    put("eps", report.eps.to_string());
    put("seed", report.seed.to_string());
    put("iterations", report.iterations.len().to_string());
    put("best_iteration", report.best_iteration.to_string());
    put("ufactor", report.chosen_ufactor.to_string());
    put("min_term_freq", report.chosen_min_term_freq.to_string());
    put("log_digest", report.log_digest.clone());
    put(
        "validation_miss_bytes_ratio",
        format!("{:.6}", report.validation_miss_bytes_ratio),
    );
    put(
        "validation_imbalance",
        format!("{:.6}", report.validation_imbalance),
    );
    for t in &report.timings {
        put(
            &format!("seconds.{}", t.stage.replace(' ', "_")),
            format!("{:.3}", t.seconds),
        );
    }
    m
}
