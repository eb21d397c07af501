//! The balancer's shadow caches against the trace simulator (issue 30): the stream of
//! queries a policy routes in the simulator, fed in the same order to the balancer's
//! [`Shadow`] (term hashes in, ids and sizes from a size table, as the balancer does), must
//! miss the same bytes as the simulated replicas, query by query, under every eviction
//! policy, with and without the table's cache admission rule. The simulator's misses are
//! what the live system matches within 0.02; this is what makes the shadow's estimate the
//! simulator's.

use std::sync::Arc;

use balancer::policy::admission::CacheAdmission;
use balancer::policy::table::TableVotes;
use balancer::policy::{build_policy, PolicyKind, PolicyParams, TermBytes};
use balancer::shadow::Shadow;
use balancer_server::replicas::{QueryClock, Replica};
use cache_sim::sim::admission::Admission;
use cache_sim::sim::{replay, Observer, SimConfig, SimLoad, Trace};
use data::sizes::{FreqTable, SizeModel, SizeTable, Sizes};
use data::synth::{generate, SynthConfig};
use data::table::{TableRow, VotingTable};
use data::tokenizer::MAX_TERMS;
use eviction::EvictionKind;

const REPLICAS: usize = 4;

/// Records each query's replica and the bytes it missed there.
struct Misses<'t> {
    trace: &'t Trace,
    per_query: Vec<(u16, u64)>,
}

impl Observer for Misses<'_> {
    fn on_route(&mut self, _query: usize, _counted: bool, d: balancer::policy::Decision) {
        self.per_query.push((d.replica, 0));
    }

    fn on_lookup(&mut self, _query: usize, _counted: bool, _replica: u16, term: u32, hit: bool) {
        if let (false, Some(last)) = (hit, self.per_query.last_mut()) {
            last.1 += self.trace.term_bytes[term as usize];
        }
    }
}

/// A synthetic log of `n` queries as a trace (all of it counted), its sizes as a table.
fn trace(n: usize) -> (Trace, SizeTable) {
    let log = generate(&SynthConfig {
        queries: n,
        ..SynthConfig::default()
    });
    let sizes = Sizes::Model {
        freq: FreqTable::from_pairs(log.freq),
        model: SizeModel::default(),
    };
    let t = Trace::build(log.queries.iter().map(String::as_str), 0, &sizes);
    let table = SizeTable::from_pairs(
        t.dict
            .terms()
            .zip(&t.term_bytes)
            .map(|(term, &b)| (term.to_owned(), b)),
    );
    (t, table)
}

/// A voting table for the admission rule: each term votes 1 for one replica and 0.4 for
/// the next, so at share 0.5 its list is cached on the first only.
fn votes(t: &Trace) -> TableVotes {
    let rows = t
        .dict
        .terms()
        .enumerate()
        .flat_map(|(i, term)| {
            let home = (i % REPLICAS) as u16;
            [
                TableRow::new(term, home, 1.0),
                TableRow::new(term, (home + 1) % REPLICAS as u16, 0.4),
            ]
        })
        .collect();
    let table = VotingTable::new(REPLICAS as u16, rows, Default::default()).unwrap();
    TableVotes::build(&table, REPLICAS, Arc::new(TermBytes::new(21))).unwrap()
}

#[test]
fn the_shadow_misses_what_the_simulator_misses_query_by_query() {
    let (t, table) = trace(30_000);
    let votes = votes(&t);
    let rule = CacheAdmission::new(0.5).unwrap();
    let admission = Arc::new(Admission::new(&t, &votes, rule));
    let capacity = t.capacity_for(0.05);
    let policy = build_policy(PolicyKind::ChBl, &PolicyParams::new(REPLICAS)).unwrap();
    let clock = Arc::new(QueryClock::default());
    let replicas: Vec<Arc<Replica>> = (0..REPLICAS)
        .map(|i| {
            let r = Replica::new(&format!("r{i}"), "127.0.0.1:1", Arc::clone(&clock)).unwrap();
            Arc::new(r)
        })
        .collect();
    let runs = EvictionKind::ALL
        .into_iter()
        .flat_map(|e| [(e, false), (e, true)]);
    for (eviction, admits) in runs {
        let cfg = SimConfig {
            admission: admits.then(|| Arc::clone(&admission)),
            replicas: REPLICAS,
            capacity_bytes: capacity,
            eviction,
            window: 1_000,
            seed: 7,
            load: SimLoad::Queries,
        };
        let mut seen = Misses {
            trace: &t,
            per_query: Vec::with_capacity(t.len()),
        };
        let sim = replay(&t, policy.as_ref(), &cfg, &mut seen);
        let shadow = Shadow::new(&table, 21, capacity, eviction);
        let mut total = 0u64;
        let mut hashes = Vec::new();
        for (q, &(replica, sim_missed)) in seen.per_query.iter().enumerate() {
            hashes.clear();
            hashes.extend(
                t.terms(q)
                    .iter()
                    .take(MAX_TERMS)
                    .map(|&id| t.term_hashes[id as usize]),
            );
            let r = usize::from(replica);
            let missed = shadow.access(r, replicas[r].owner(), &hashes, |h| {
                !admits || rule.caches(&votes, h, replica)
            });
            assert_eq!(
                missed, sim_missed,
                "{eviction} (admission {admits}): query {q} on r{r}: shadow {missed} bytes, \
                 simulator {sim_missed}"
            );
            total += missed;
        }
        assert_eq!(
            total, sim.miss_bytes,
            "{eviction} (admission {admits}): shadow {total} bytes vs simulator {} over {} \
             queries",
            sim.miss_bytes, sim.queries
        );
        assert!(sim.miss_bytes > 0 && sim.miss_bytes < sim.requested_bytes);
    }
}
