//! Simulation-driven refinement of the votes.
//!
//! Routing changes what each cache holds, so a table is judged by replaying the train part
//! through the `table` policy in the cache simulator, the same code `ballot eval` runs.
//! The train part is split into a *fit* prefix, which warms the caches and supplies the
//! observations, and a *validation* suffix, whose miss bytes ratio decides which iteration's
//! table is kept (early stopping). Each iteration observes, for every term and replica, how
//! often the term's postings were requested there and how often they hit, then applies the
//! update rule:
//!
//! 1. **Follow the traffic.** A term's home moves to the replica where it was requested
//!    most, when that replica saw at least `1 + move_margin` times the requests of the
//!    current home. Queries go where their heavy terms vote; a light term that keeps being
//!    pulled elsewhere by its co-occurring terms should live there (label propagation on the
//!    term–query graph).
//! 2. **Weight by what is saved.** A term's vote weight becomes its postings bytes times its
//!    smoothed hit rate at home, `(hits + 1) / (requests + 2)`: a vote is worth the flash
//!    bytes routing the query there is expected to save. Terms that never hit (one-offs,
//!    lists too big to stay cached) stop dragging queries away from terms that do.
//! 3. **Vote where it hits.** Besides its home, a term votes for every other replica that
//!    requested it at least `secondary_min_requests` times, with the same weight rule
//!    (bytes × smoothed hit rate there, times `secondary`). A query's score on a replica then
//!    approximates the postings bytes it would find cached there, which counts the popular
//!    terms every replica holds and lets hot terms have several homes.
//! 4. **Price the load.** Each replica has a multiplier on the votes it receives, lowered
//!    when more queries would pick it first than its fair share and raised when fewer
//!    (dual ascent on the balance constraint with a decaying step:
//!    `λ_r ← λ_r · (fair / demand_r)^(step / √(k + 1))` at iteration k). Fewer
//!    queries then overflow the load bound to a random replica, which pollutes caches.
//!
//! 5. **Price the flash (optional, `flash_price > 0`).** The same multiplier is also moved
//!    by each replica's share of the flash bytes read over the fit part:
//!    `λ_r ← λ_r · (fair / flash_r)^(flash_price · step / √(k + 1))`. Balanced query counts
//!    can still leave one replica reading much more than the others (it is home to the
//!    heaviest lists), and when flash is the bottleneck that replica caps throughput.
//!
//! The best table on validation is kept, so refinement never returns a table worse on
//! validation than the initial one. "Best" is the lowest [`objective`]: the miss bytes
//! ratio, or, with a flash price, the flash bytes the busiest replica reads per query.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Arc;

use balancer::load::LoadView;
use balancer::policy::table::TablePolicy;
use balancer::policy::{Decision, PolicyKind, PolicyParams, QueryKey, RoutingPolicy};
use cache_sim::sim::{replay, Observer, SimConfig, SimLoad, SimResult, Trace};
use data::rng::Rng;
use serde::Serialize;

use crate::stable::Budget;
use crate::votes::TermVotes;

/// Parameters of the refinement.
#[derive(Clone, Debug, PartialEq)]
pub struct RefineConfig {
    /// Iterations after the initial evaluation.
    pub iterations: usize,
    /// Stop after this many iterations without a validation improvement.
    pub patience: usize,
    /// Relative request advantage a replica needs before a term moves there.
    pub move_margin: f64,
    /// Exponent of the first load-price update; iteration k uses `price_step / √(k + 1)`.
    pub price_step: f64,
    /// Weight factor of secondary votes (0 disables them).
    pub secondary: f64,
    /// Requests a replica must have seen for a term before it gets a secondary vote.
    pub secondary_min_requests: u32,
    /// Weight of the flash-balance price (0: balance query counts only).
    pub flash_price: f64,
}

/// What refinement (and candidate selection) minimizes on validation: the miss bytes ratio,
/// or with `flash_price > 0` the flash bytes per query of the busiest replica
/// (`flash_bytes_per_query · R · max flash share`), which bounds throughput when flash is
/// the bottleneck.
pub fn objective(result: &SimResult, flash_price: f64) -> f64 {
    if flash_price > 0.0 {
        result.flash_bytes_per_query * result.flash_shares.len() as f64 * result.flash_share_max
    } else {
        result.miss_bytes_ratio
    }
}

impl Default for RefineConfig {
    fn default() -> Self {
        RefineConfig {
            iterations: 40,
            patience: 6,
            move_margin: 0.25,
            price_step: 0.3,
            secondary: 1.0,
            secondary_min_requests: 4,
            flash_price: 0.0,
        }
    }
}

/// One iteration's measurements.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IterationRecord {
    /// Pruning threshold of the candidate being refined.
    pub min_term_freq: u32,
    /// METIS imbalance tolerance of the candidate partition being refined.
    pub ufactor: i32,
    /// 0 = the initial table.
    pub iteration: usize,
    /// Miss bytes ratio over the fit part (cold start included).
    pub train_miss_bytes_ratio: f64,
    /// Miss bytes ratio over the validation part.
    pub validation_miss_bytes_ratio: f64,
    /// Max/mean queries per replica over the validation part.
    pub validation_imbalance: f64,
    /// Share of validation queries that overflowed their first choice.
    pub validation_overflow: f64,
    /// Terms whose home moved in the update after this evaluation.
    pub moved_terms: u64,
    /// Voting terms.
    pub voting_terms: u64,
}

/// Per-term, per-replica observations of one replay.
struct Watch {
    replicas: usize,
    requests: Vec<u32>,
    hits: Vec<u32>,
    fit_requested: u64,
    fit_missed: u64,
    /// Flash bytes read per replica over the fit part.
    fit_missed_by_replica: Vec<u64>,
    bytes: Arc<[u64]>,
    /// The first choice of the query just routed ([`NotingFirstChoice`]).
    last_first: Arc<AtomicU32>,
    /// Each fit query's first choice.
    first: Vec<Option<u16>>,
}

impl Observer for Watch {
    #[inline]
    fn on_route(&mut self, query: usize, counted: bool, _decision: Decision) {
        if !counted {
            // A replica index is below MAX_REPLICAS, so it fits a u16; NONE is no vote.
            let c = self.last_first.load(Relaxed);
            self.first[query] = (c != NONE).then_some(c as u16);
        }
    }

    #[inline]
    fn on_lookup(&mut self, _query: usize, counted: bool, replica: u16, term: u32, hit: bool) {
        if counted {
            return;
        }
        let i = term as usize * self.replicas + replica as usize;
        self.requests[i] += 1;
        let b = self.bytes[term as usize];
        self.fit_requested += b;
        if hit {
            self.hits[i] += 1;
        } else {
            self.fit_missed += b;
            self.fit_missed_by_replica[replica as usize] += b;
        }
    }
}

/// [`NotingFirstChoice`]'s "no replica got a vote".
const NONE: u32 = u32::MAX;

/// The `table` policy as a replay routes with it, noting each query's first choice (its
/// top-ranked replica before the load bound) from the scores the route computed anyway;
/// the replay then tells [`Watch`] which query it was.
struct NotingFirstChoice<'a> {
    policy: &'a TablePolicy,
    last_first: Arc<AtomicU32>,
}

impl RoutingPolicy for NotingFirstChoice<'_> {
    fn kind(&self) -> PolicyKind {
        PolicyKind::Table
    }

    fn route(&self, query: &QueryKey<'_>, load: &dyn LoadView, rng: &mut Rng) -> Option<Decision> {
        let (decision, top) = self.policy.route_ranked(query, load, rng);
        self.last_first
            .store(top.map_or(NONE, |c| c as u32), Relaxed);
        decision
    }
}

/// The refinement's result.
pub struct Refined {
    /// The best votes on validation.
    pub best: TermVotes,
    /// Its validation result.
    pub best_result: SimResult,
    /// Which iteration it came from (0 = initial).
    pub best_iteration: usize,
    /// Every iteration's record.
    pub history: Vec<IterationRecord>,
}

/// Builds the `table` policy for `votes` (the same code `ballot eval` and the balancer use).
pub(crate) fn table_policy(
    trace: &Trace,
    votes: &TermVotes,
    params: &PolicyParams,
) -> Result<TablePolicy, String> {
    let table = votes
        .to_table(trace, Default::default())
        .map_err(|e| e.to_string())?;
    let params = PolicyParams {
        table: Some(Arc::new(table)),
        ..params.clone()
    };
    TablePolicy::new(&params).map_err(|e| e.to_string())
}

/// Refines `initial` by simulation on `trace` (its `train_len` is the fit part, the rest
/// is validation). With a `budget` (stable retraining, [`crate::stable`]) a term leaves
/// its served home only while the budget lasts, keeps its served votes at its served home,
/// and elsewhere its home stays its top vote.
/// `progress` is called after each evaluation.
pub fn refine(
    trace: &Trace,
    initial: TermVotes,
    sim: &SimConfig,
    params: &PolicyParams,
    cfg: &RefineConfig,
    budget: Option<&Budget>,
    mut progress: impl FnMut(&IterationRecord),
) -> Result<Refined, String> {
    let r = sim.replicas;
    let bytes: Arc<[u64]> = trace.term_bytes.clone().into();
    let mut prices = vec![1.0f64; r];
    let mut votes = initial;
    let mut history = Vec::new();
    let mut best: Option<(TermVotes, SimResult, usize)> = None;
    let mut since_best = 0usize;
    for iteration in 0..=cfg.iterations {
        let policy = table_policy(trace, &votes, params)?;
        let mut watch = Watch {
            replicas: r,
            requests: vec![0; trace.dict.len() * r],
            hits: vec![0; trace.dict.len() * r],
            fit_requested: 0,
            fit_missed: 0,
            fit_missed_by_replica: vec![0; r],
            bytes: bytes.clone(),
            last_first: Arc::new(AtomicU32::new(NONE)),
            first: vec![None; trace.train_len],
        };
        let noting = NotingFirstChoice {
            policy: &policy,
            last_first: Arc::clone(&watch.last_first),
        };
        let result = replay(trace, &noting, sim, &mut watch);
        let demand = first_choice_demand(trace, params.replicas, sim.load, &watch);
        let step = cfg.price_step / ((iteration + 1) as f64).sqrt();
        reprice(&mut prices, &demand, &watch, step, cfg);
        let (next, moved) = revote(&votes, &watch, &prices, trace, cfg, budget);
        let record = IterationRecord {
            min_term_freq: 0,
            ufactor: 0,
            iteration,
            train_miss_bytes_ratio: ratio(watch.fit_missed, watch.fit_requested),
            validation_miss_bytes_ratio: result.miss_bytes_ratio,
            validation_imbalance: result.imbalance,
            validation_overflow: result.overflow_share,
            moved_terms: moved,
            voting_terms: votes.voting_terms() as u64,
        };
        progress(&record);
        history.push(record);
        let improved = best.as_ref().is_none_or(|(_, b, _)| {
            objective(&result, cfg.flash_price) < objective(b, cfg.flash_price)
        });
        if improved {
            best = Some((votes.clone(), result, iteration));
            since_best = 0;
        } else {
            since_best += 1;
            if since_best >= cfg.patience {
                break;
            }
        }
        votes = next;
    }
    let (best, best_result, best_iteration) = best.ok_or("no iteration ran")?;
    Ok(Refined {
        best,
        best_result,
        best_iteration,
        history,
    })
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// The load each replica would get if every query of the fit part went to its first choice
/// (its top-ranked replica, ignoring the bound, as the `table` policy's route
/// scored it), in the units the simulator's load bound counts: queries, or (with
/// [`SimLoad::Work`]) the work the bound charges, each query's fixed cost plus the flash
/// bytes it is expected to miss there, `bytes(t) · (1 − hits/requests)` per term as the
/// last replay observed at that replica (a term never requested there counts as a miss).
fn first_choice_demand(trace: &Trace, r: usize, load: SimLoad, watch: &Watch) -> Vec<u64> {
    let mut demand = vec![0u64; r];
    for (q, top) in watch.first.iter().enumerate() {
        if let Some(c) = top.map(usize::from) {
            demand[c] += match load {
                SimLoad::Queries => 1,
                SimLoad::Work { query_bytes } => {
                    let expected_miss: f64 = trace
                        .terms(q)
                        .iter()
                        .map(|&t| {
                            let i = t as usize * watch.replicas + c;
                            let (req, hits) = (watch.requests[i], watch.hits[i]);
                            let miss = if req == 0 {
                                1.0
                            } else {
                                1.0 - f64::from(hits) / f64::from(req)
                            };
                            trace.term_bytes[t as usize] as f64 * miss
                        })
                        .sum();
                    query_bytes.saturating_add(expected_miss as u64)
                }
            };
        }
    }
    demand
}

/// Steps 4 and 5 of the module docs: moves each replica's price by its first-choice
/// `demand` and, with a flash price, by its share of the fit part's flash bytes.
fn reprice(prices: &mut [f64], demand: &[u64], watch: &Watch, step: f64, cfg: &RefineConfig) {
    let r = prices.len();
    let total: u64 = demand.iter().sum();
    if total > 0 {
        let fair = total as f64 / r as f64;
        for (p, &d) in prices.iter_mut().zip(demand) {
            let d = (d as f64).max(1.0);
            *p = (*p * (fair / d).powf(step)).clamp(0.25, 4.0);
        }
    }
    let flash: u64 = watch.fit_missed_by_replica.iter().sum();
    if cfg.flash_price > 0.0 && flash > 0 {
        let fair = flash as f64 / r as f64;
        for (p, &f) in prices.iter_mut().zip(&watch.fit_missed_by_replica) {
            let f = (f as f64).max(1.0);
            *p = (*p * (fair / f).powf(step * cfg.flash_price)).clamp(0.25, 4.0);
        }
    }
}

/// Steps 1 to 3 of the module docs under the current `prices`; returns the new votes and
/// how many terms moved. With a `budget`, moves away from the served homes are admitted in
/// order of request advantage while the budget lasts, a term at its served home keeps its
/// served votes, and a moved term's secondary votes stay below its home's.
fn revote(
    votes: &TermVotes,
    watch: &Watch,
    prices: &[f64],
    trace: &Trace,
    cfg: &RefineConfig,
    budget: Option<&Budget>,
) -> (TermVotes, u64) {
    let r = prices.len();
    let mut homes: Vec<Option<u16>> = votes
        .votes
        .iter()
        .enumerate()
        .map(|(t, list)| {
            let &(home, _) = list.first()?;
            let row = &watch.requests[t * r..(t + 1) * r];
            let (mut best_r, mut best_req) = (home as usize, row[home as usize]);
            for (c, &req) in row.iter().enumerate() {
                if req > best_req {
                    best_r = c;
                    best_req = req;
                }
            }
            let home_req = f64::from(row[home as usize]);
            Some(
                if f64::from(best_req) >= (1.0 + cfg.move_margin) * home_req {
                    best_r as u16
                } else {
                    home
                },
            )
        })
        .collect();
    if let Some(budget) = budget {
        keep_within(budget, votes, watch, &mut homes);
    }
    let mut moved = 0u64;
    let mut next = votes.clone();
    for (t, list) in next.votes.iter_mut().enumerate() {
        let (Some(&(home, _)), Some(new_home)) = (list.first(), homes[t]) else {
            continue;
        };
        if new_home != home {
            moved += 1;
        }
        if let Some(served) = budget.map(|b| &b.served[t]) {
            if served.first().is_some_and(|&(h, _)| h == new_home) {
                // At its served home a term keeps the served votes (crate::stable).
                list.clone_from(served);
                continue;
            }
        }
        let new_home = usize::from(new_home);
        let row = &watch.requests[t * r..(t + 1) * r];
        let hits = &watch.hits[t * r..(t + 1) * r];
        let bytes = trace.term_bytes[t] as f64;
        let hit_rate = |c: usize| (f64::from(hits[c]) + 1.0) / (f64::from(row[c]) + 2.0);
        let home_weight = (bytes * hit_rate(new_home) * prices[new_home]) as f32;
        list.clear();
        list.push((new_home as u16, home_weight));
        if cfg.secondary > 0.0 {
            for (c, &req) in row.iter().enumerate() {
                if c != new_home && req >= cfg.secondary_min_requests {
                    let mut w = (bytes * hit_rate(c) * prices[c] * cfg.secondary) as f32;
                    if budget.is_some() {
                        // The home stays the top vote (the first of equal weights).
                        w = w.min(home_weight * BELOW_HOME);
                    }
                    list.push((c as u16, w));
                }
            }
        }
    }
    (next, moved)
}

/// Under a budget, a secondary vote weighs at most this share of the home's, so the home
/// stays the term's top vote.
const BELOW_HOME: f32 = 0.999;

/// Undoes the proposed moves (`homes`, per term) that would take the movement past
/// `budget`: moves back to a served home and moves between two other replicas are free;
/// moves away from a served home are admitted by request advantage (requests at the new
/// home over requests at the current one), largest first, while the budget lasts.
fn keep_within(budget: &Budget, votes: &TermVotes, watch: &Watch, homes: &mut [Option<u16>]) {
    let r = watch.replicas;
    let current = |t: usize| votes.votes[t].first().map(|&(h, _)| h);
    // What the unchanged terms and the free moves spend.
    let mut costly: Vec<(f64, usize)> = Vec::new();
    let mut spent = 0u64;
    for (t, &proposed) in homes.iter().enumerate() {
        let (Some(served), Some(new)) = (budget.homes.get(t).copied().flatten(), proposed) else {
            continue;
        };
        let now = current(t);
        if new == served {
            continue;
        }
        if now != Some(served) {
            spent += budget.cost[t];
            continue;
        }
        let row = &watch.requests[t * r..(t + 1) * r];
        let advantage =
            f64::from(row[usize::from(new)]) / f64::from(row[usize::from(served)]).max(1.0);
        costly.push((advantage, t));
    }
    for (t, admitted) in budget.admit(costly, spent) {
        if !admitted {
            homes[t] = current(t);
        }
    }
}
