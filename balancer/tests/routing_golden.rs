//! Golden routing tests: the exact replica sequence of every policy on a fixed query
//! sequence with a fixed seed, plus one hand-derived case per policy.
//!
//! If a golden sequence changes, routing changed for every deployed table and every
//! simulation: change it only on purpose.

use std::collections::BTreeMap;
use std::sync::Arc;

use balancer::load::{LatencyStats, Signaled, Signals};
use balancer::policy::ch_bl::ChBl;
use balancer::policy::query_hash::QueryHash;
use balancer::policy::rj_ch::RjCh;
use balancer::policy::round_robin::RoundRobin;
use balancer::policy::table::TableVotes;
use balancer::policy::vote::{Scores, VoteSource};
use balancer::policy::DEFAULT_TERM_BYTES;
use balancer::ring::Ring;
use balancer::shadow::{FixedOwners, Owner, Shadow};
use balancer::{
    build_policy, hash_tokens, load_cap, Decision, LoadView, PolicyError, PolicyKind, PolicyParams,
    QueryKey, Reason, RoutingPolicy, StaticLoad, TermBytes,
};
use data::hash::term_hash;
use data::rng::Rng;
use data::table::{TableRow, VotingTable};
use data::tokenizer::Tokens;
use eviction::EvictionKind;

fn table(replicas: u16, rows: &[(&str, u16, f32)]) -> VotingTable {
    VotingTable {
        replicas,
        rows: rows
            .iter()
            .map(|&(t, r, w)| TableRow {
                term: t.to_owned(),
                replica: r,
                weight: w,
            })
            .collect(),
        metadata: BTreeMap::new(),
    }
}

/// Hashes of a query, as the simulator and the balancer compute them.
fn key_of(q: &str) -> (u64, Vec<u64>) {
    let mut tokens = Tokens::new();
    tokens.tokenize(q);
    let mut hashes = Vec::new();
    let qh = hash_tokens(&tokens, &mut hashes);
    (qh, hashes)
}

fn route(policy: &dyn RoutingPolicy, q: &str, load: &dyn LoadView, rng: &mut Rng) -> Decision {
    try_route(policy, q, load, rng).expect("a live replica")
}

fn try_route(
    policy: &dyn RoutingPolicy,
    q: &str,
    load: &dyn LoadView,
    rng: &mut Rng,
) -> Option<Decision> {
    let (qh, hashes) = key_of(q);
    policy.route(&QueryKey::new(qh, &hashes), load, rng)
}

fn tag(d: Decision) -> String {
    let r = match d.reason {
        Reason::Vote => 'v',
        Reason::Home => 'h',
        Reason::Overflow => 'o',
        Reason::Stalled => 's',
        Reason::NoVote => 'n',
        Reason::Stolen => 't',
    };
    format!("{}{}", d.replica, r)
}

const QUERIES: [&str; 16] = [
    "new york times",
    "weather",
    "new york weather",
    "cheap flights",
    "google",
    "ebay",
    "new york times",
    "cheap flights to new york",
    "weather radar",
    "google maps",
    "times square",
    "ebay motors",
    "weather",
    "york pa",
    "flights",
    "google",
];

fn golden_table() -> VotingTable {
    table(
        4,
        &[
            ("new", 0, 1.0),
            ("york", 0, 2.0),
            ("york", 1, 1.0),
            ("times", 2, 1.5),
            ("weather", 3, 2.0),
            ("cheap", 1, 1.0),
            ("flights", 1, 3.0),
            ("google", 2, 4.0),
            ("google", 3, 4.0),
            ("maps", 0, 0.0),
            ("radar", 3, 0.5),
        ],
    )
}

/// The terms of [`QUERIES`], with postings bytes for the shadow caches.
const TERMS: [(&str, u64); 14] = [
    ("new", 300),
    ("york", 250),
    ("times", 200),
    ("weather", 350),
    ("cheap", 150),
    ("flights", 300),
    ("google", 400),
    ("ebay", 250),
    ("to", 500),
    ("radar", 100),
    ("maps", 150),
    ("square", 100),
    ("motors", 100),
    ("pa", 50),
];

/// Routes the 16 queries over 4 replicas starting at loads `[2, 0, 4, 1]` (eps 0.05); each
/// decision adds one to its replica's load, so the bounded policies meet their cap. The
/// view carries the signals the peers read, fed as a router feeds them: a shadow cache of
/// 1,000 bytes per replica (LRU) takes each query's terms at its replica, and each answer
/// reports a speed that grows with its replica's load (response `10 + 5·load` ms, service
/// `2 + load` ms, queue `load`).
fn golden_run(kind: PolicyKind) -> String {
    let params = PolicyParams::new(4).with_table(Arc::new(golden_table()));
    let policy = build_policy(kind, &params).expect("valid params");
    let mut load = StaticLoad::new(vec![2, 0, 4, 1]);
    let stats = LatencyStats::default();
    let terms = TERMS.iter().map(|&(t, b)| (term_hash(t), b));
    let shadow = Shadow::from_terms(terms, DEFAULT_TERM_BYTES, 1_000, EvictionKind::Lru);
    let mut rng = Rng::new(2024);
    let mut out = Vec::new();
    for q in QUERIES {
        let signals = Signals {
            latency: Some(&stats),
            shadow: Some((&shadow, &FixedOwners)),
        };
        let d = route(policy.as_ref(), q, &Signaled::new(&load, signals), &mut rng);
        let r = usize::from(d.replica);
        shadow.access(r, Owner { id: r, since: 0 }, &key_of(q).1, |_| true);
        load.loads[r] += 1;
        let l = load.loads[r] as f64;
        stats.record(r, 10.0 + 5.0 * l, Some(2.0 + l), Some(l));
        out.push(tag(d));
    }
    out.join(" ")
}

/// The expected decisions of every policy in the registry, by name. A policy added to the
/// registry without an entry here fails [`golden_sequences`].
const EXPECTED: [(&str, &str); 13] = [
    (
        "round-robin",
        "0n 1n 2n 3n 0n 1n 2n 3n 0n 1n 2n 3n 0n 1n 2n 3n",
    ),
    ("random", "0n 3n 0n 0n 3n 0n 1n 1n 2n 0n 2n 3n 3n 1n 3n 0n"),
    (
        "least-loaded",
        "1n 1n 3n 0n 1n 3n 0n 1n 3n 0n 1n 2n 3n 0n 1n 2n",
    ),
    ("p2c", "3n 1n 3n 1n 0n 3n 1n 0n 0n 1n 2n 0n 1n 2n 1n 3n"),
    (
        "query-hash",
        "1v 2v 0v 0v 1v 3v 1v 0v 3v 0v 2v 2v 2v 3v 3v 1v",
    ),
    ("ch-bl", "1v 0o 3o 3o 1v 3v 1v 0v 3v 0v 2v 1o 2v 3v 1o 1v"),
    ("rj-ch", "1v 0o 3o 1o 1v 3v 1v 0v 3v 0v 2v 1o 2v 3v 3v 1v"),
    (
        "term-vote",
        "3o 0v 3o 1o 3v 1v 1o 0o 0v 3o 2v 1v 0v 2v 3v 3v",
    ),
    ("table", "0v 3v 3o 1v 3o 1v 0v 1v 3v 2v 0o 1v 3v 0v 1v 2v"),
    ("ars", "0n 3n 1n 2n 1n 1n 3n 1n 3n 0n 1n 3n 0n 2n 1n 3n"),
    (
        "stable-hash",
        "3v 0v 1v 1v 3v 1v 3v 2v 2v 0v 2v 2v 0v 0v 3v 3v",
    ),
    ("prequal", "3n 0n 1n 1n 3n 1n 3n 2n 1n 3n 1n 0n 0n 1n 0n 3n"),
    (
        "cache-aware",
        "1n 1n 1v 3n 0n 3n 1v 1v 0n 0v 3n 3v 0v 1v 3v 0v",
    ),
];

#[test]
fn golden_sequences() {
    let mut bad = Vec::new();
    for kind in PolicyKind::ALL {
        let Some(&(_, want)) = EXPECTED.iter().find(|(name, _)| *name == kind.name()) else {
            bad.push(format!(
                "{kind}: no golden sequence; write down its expected decisions in EXPECTED"
            ));
            continue;
        };
        let got = golden_run(kind);
        if got != want {
            bad.push(format!(
                "{kind}: decisions changed\n  want {want}\n  got  {got}"
            ));
        }
    }
    for (name, _) in EXPECTED {
        if name.parse::<PolicyKind>().is_err() {
            bad.push(format!(
                "{name}: golden data for a policy not in the registry"
            ));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_kind_builds_and_round_trips() {
    let params = PolicyParams::new(8).with_table(Arc::new(table(8, &[("a", 3, 1.0)])));
    let no_table = PolicyParams::new(8);
    let load = StaticLoad::idle(8);
    for kind in PolicyKind::ALL {
        assert_eq!(kind.to_string().parse::<PolicyKind>(), Ok(kind));
        assert_eq!(kind.name(), kind.to_string());
        let policy = build_policy(kind, &params).expect("valid params");
        assert_eq!(policy.kind(), kind);
        let d = route(policy.as_ref(), "a b c", &load, &mut Rng::new(1));
        assert!(d.replica < 8);
        assert_eq!(
            build_policy(kind, &no_table).is_err(),
            kind.needs_table(),
            "{kind}"
        );
        for bad in [
            PolicyParams::new(0),
            PolicyParams::new(65),
            PolicyParams {
                vnodes: 99,
                ..params.clone()
            },
            PolicyParams {
                eps: f64::NAN,
                ..params.clone()
            },
            PolicyParams {
                eps: -0.5,
                ..params.clone()
            },
        ] {
            assert!(build_policy(kind, &bad).is_err(), "{kind}");
        }
    }
    let err = "least_loaded"
        .parse::<PolicyKind>()
        .unwrap_err()
        .to_string();
    for kind in PolicyKind::ALL {
        assert!(err.contains(kind.name()), "{err}");
    }
    let wrong_r = PolicyParams::new(4).with_table(Arc::new(table(8, &[])));
    assert!(matches!(
        build_policy(PolicyKind::Table, &wrong_r).err(),
        Some(PolicyError::TableReplicas {
            table: 8,
            expected: 4
        })
    ));
    assert_eq!(Reason::Vote.as_str(), "vote");
    assert_eq!(Reason::Overflow.to_string(), "overflow");
    assert_eq!(Reason::NoVote.as_str(), "no-vote");
}

#[test]
fn no_live_replica_gives_no_decision() {
    let params = PolicyParams::new(4).with_table(Arc::new(golden_table()));
    let dead = StaticLoad::with_live(vec![1, 2, 3, 4], vec![false; 4]);
    for kind in PolicyKind::ALL {
        let policy = build_policy(kind, &params).expect("valid params");
        let d = try_route(policy.as_ref(), "new york", &dead, &mut Rng::new(1));
        assert_eq!(d, None, "{kind}");
    }
}

// ---------------------------------------------------------------------------------------
// Hand-derived cases, one per policy.

#[test]
fn hand_round_robin_skips_dead_replicas() {
    // Live {0, 2, 3}: turns 0, 1, 2, 3, ... pick the (turn mod 3)-th live replica.
    let policy = RoundRobin::new(4);
    let load = StaticLoad::with_live(vec![0; 4], vec![true, false, true, true]);
    let mut rng = Rng::new(1);
    let got: Vec<u16> = (0..6)
        .map(|_| route(&policy, "x", &load, &mut rng).replica)
        .collect();
    assert_eq!(got, [0, 2, 3, 0, 2, 3]);
}

#[test]
fn hand_random_draws_one_below_live_per_query() {
    let policy = build_policy(PolicyKind::Random, &PolicyParams::new(4)).expect("valid");
    // Live {1, 3}: the k-th live replica for k = below(2).
    let load = StaticLoad::with_live(vec![0; 4], vec![false, true, false, true]);
    let mut rng = Rng::new(9);
    let mut mirror = Rng::new(9);
    for _ in 0..50 {
        let d = route(policy.as_ref(), "x", &load, &mut rng);
        let want = [1, 3][mirror.below(2) as usize];
        assert_eq!(
            d,
            Decision {
                replica: want,
                reason: Reason::NoVote
            }
        );
    }
}

#[test]
fn hand_least_loaded_ties_to_lowest_index() {
    let policy = build_policy(PolicyKind::LeastLoaded, &PolicyParams::new(4)).expect("valid");
    let mut rng = Rng::new(1);
    // Loads [5, 3, 3, 9]: replicas 1 and 2 tie at 3 -> 1.
    let load = StaticLoad::new(vec![5, 3, 3, 9]);
    assert_eq!(route(policy.as_ref(), "x", &load, &mut rng).replica, 1);
    // Replica 1 dead -> 2.
    let load = StaticLoad::with_live(vec![5, 3, 3, 9], vec![true, false, true, true]);
    assert_eq!(route(policy.as_ref(), "x", &load, &mut rng).replica, 2);
}

#[test]
fn hand_p2c_takes_the_less_loaded_of_two_distinct_draws() {
    let policy = build_policy(PolicyKind::P2c, &PolicyParams::new(3)).expect("valid");
    // Only 0 and 2 live: both are always drawn, 2 is less loaded.
    let load = StaticLoad::with_live(vec![5, 0, 2], vec![true, false, true]);
    let mut rng = Rng::new(5);
    for _ in 0..20 {
        assert_eq!(route(policy.as_ref(), "x", &load, &mut rng).replica, 2);
    }
    // Four live replicas, loads [4, 1, 1, 7]: i = below(4), j = below(3) shifted past i;
    // the less loaded of the two, the first drawn on a tie.
    let policy = build_policy(PolicyKind::P2c, &PolicyParams::new(4)).expect("valid");
    let loads = [4u64, 1, 1, 7];
    let load = StaticLoad::new(loads.to_vec());
    let mut rng = Rng::new(11);
    let mut mirror = Rng::new(11);
    for _ in 0..100 {
        let i = mirror.below(4) as usize;
        let mut j = mirror.below(3) as usize;
        if j >= i {
            j += 1;
        }
        let want = if loads[j] < loads[i] { j } else { i };
        assert_eq!(
            usize::from(route(policy.as_ref(), "x", &load, &mut rng).replica),
            want
        );
    }
}

#[test]
fn hand_query_hash_is_the_ring_owner() {
    let params = PolicyParams::new(4);
    let policy = QueryHash::new(&params).expect("valid");
    let ring = Ring::new(4, 160).expect("valid");
    let (qh, hashes) = key_of("new york times");
    let key = QueryKey::new(qh, &hashes);
    let order: Vec<usize> = ring.walk(qh).collect();
    let mut rng = Rng::new(1);
    // All live: the owner of the first point clockwise.
    let d = policy.route(&key, &StaticLoad::idle(4), &mut rng).unwrap();
    assert_eq!(usize::from(d.replica), order[0]);
    assert_eq!(d.reason, Reason::Vote);
    // Owner dead: the next distinct replica clockwise.
    let mut live = vec![true; 4];
    live[order[0]] = false;
    let d = policy
        .route(&key, &StaticLoad::with_live(vec![0; 4], live), &mut rng)
        .unwrap();
    assert_eq!(usize::from(d.replica), order[1]);
    // Load does not matter.
    let mut loads = vec![0; 4];
    loads[order[0]] = 1000;
    let d = policy
        .route(&key, &StaticLoad::new(loads), &mut rng)
        .unwrap();
    assert_eq!(usize::from(d.replica), order[0]);
}

#[test]
fn hand_ch_bl_walks_clockwise_past_full_replicas() {
    let params = PolicyParams::new(4);
    let policy = ChBl::new(&params).expect("valid");
    let (qh, hashes) = key_of("cheap flights");
    let key = QueryKey::new(qh, &hashes);
    let order: Vec<usize> = policy.ring().walk(qh).collect();
    let mut rng = Rng::new(1);
    // Loads: home 10, others 2 -> total 16, cap = ceil(1.05 * 17 / 4) = 5.
    let mut loads = vec![2; 4];
    loads[order[0]] = 10;
    assert_eq!(load_cap(0.05, 16, 4), 5);
    let d = policy
        .route(&key, &StaticLoad::new(loads.clone()), &mut rng)
        .unwrap();
    assert_eq!(
        d,
        Decision {
            replica: order[1] as u16,
            reason: Reason::Overflow
        }
    );
    // Second at the cap as well: with it at 6 the total is 20 and
    // cap = ceil(1.05 * 21 / 4) = 6, so the third replica clockwise takes the query.
    loads[order[1]] = 6;
    assert_eq!(load_cap(0.05, 20, 4), 6);
    let d = policy
        .route(&key, &StaticLoad::new(loads), &mut rng)
        .unwrap();
    assert_eq!(
        d,
        Decision {
            replica: order[2] as u16,
            reason: Reason::Overflow
        }
    );
    // Home under the cap: home, Vote.
    let d = policy.route(&key, &StaticLoad::idle(4), &mut rng).unwrap();
    assert_eq!(
        d,
        Decision {
            replica: order[0] as u16,
            reason: Reason::Vote
        }
    );
}

#[test]
fn hand_rj_ch_jumps_at_random_not_to_the_neighbour() {
    let params = PolicyParams::new(4);
    let policy = RjCh::new(&params).expect("valid");
    let (qh, hashes) = key_of("cheap flights");
    let key = QueryKey::new(qh, &hashes);
    let order: Vec<usize> = policy.ring().walk(qh).collect();
    // Home 10, clockwise neighbour 6, the others 2 and 2: total 20, cap 6. Only the last
    // two are under the cap; the jump is uniform over them and never the neighbour.
    let mut loads = vec![0; 4];
    loads[order[0]] = 10;
    loads[order[1]] = 6;
    loads[order[2]] = 2;
    loads[order[3]] = 2;
    let load = StaticLoad::new(loads);
    let mut rng = Rng::new(3);
    let mut seen = [0u32; 4];
    for _ in 0..400 {
        let d = policy.route(&key, &load, &mut rng).unwrap();
        assert_eq!(d.reason, Reason::Overflow);
        seen[usize::from(d.replica)] += 1;
    }
    assert_eq!(seen[order[0]] + seen[order[1]], 0);
    assert!(seen[order[2]] > 150 && seen[order[3]] > 150, "{seen:?}");
    // Home under the cap: home, Vote.
    let d = policy.route(&key, &StaticLoad::idle(4), &mut rng).unwrap();
    assert_eq!(
        d,
        Decision {
            replica: order[0] as u16,
            reason: Reason::Vote
        }
    );
}

/// `term_hash(t) % 4` for apple, banana and cherry (distinct, so the sums below are plain).
const RA: u64 = 1;
const RB: u64 = 2;
const RC: u64 = 0;
/// "apple banana cherry" scores: 1 -> 1000, 2 -> 600, 0 -> 500, 3 -> 0.
const WINNER_ABC: usize = 1;
const SECOND_ABC: usize = 2;

#[test]
fn hand_term_vote_bytes_decide_and_the_cap_bounds() {
    // The residues mod 4 of these terms, computed here and pinned:
    let residue = |t: &str| term_hash(t) % 4;
    let (a, b, c) = ("apple", "banana", "cherry");
    let (ra, rb, rc) = (residue(a), residue(b), residue(c));
    assert_eq!((ra, rb, rc), (RA, RB, RC), "term_hash changed");
    // Byte weights: apple 1000, banana 600, cherry 500 (unknown terms weigh 21).
    let mut tb = TermBytes::default();
    tb.insert(term_hash(a), 1000);
    tb.insert(term_hash(b), 600);
    tb.insert(term_hash(c), 500);
    let params = PolicyParams::new(4).with_term_bytes(Arc::new(tb));
    let policy = build_policy(PolicyKind::TermVote, &params).expect("valid");
    let mut rng = Rng::new(1);
    let idle = StaticLoad::idle(4);
    // "banana cherry": banana -> RB with 600, cherry -> RC with 500; if they share a
    // replica it has 1100, which beats nothing else. Either way the winner is RB.
    let d = route(policy.as_ref(), "banana cherry", &idle, &mut rng);
    assert_eq!(
        d,
        Decision {
            replica: RB as u16,
            reason: Reason::Vote
        }
    );
    // "apple banana cherry": scores RA += 1000, RB += 600, RC += 500.
    let mut scores = [0u64; 4];
    scores[RA as usize] += 1000;
    scores[RB as usize] += 600;
    scores[RC as usize] += 500;
    let winner = WINNER_ABC;
    assert_eq!(
        scores
            .iter()
            .enumerate()
            .max_by_key(|&(i, &s)| (s, std::cmp::Reverse(i)))
            .map(|x| x.0),
        Some(winner)
    );
    let d = route(policy.as_ref(), "apple banana cherry", &idle, &mut rng);
    assert_eq!(
        d,
        Decision {
            replica: winner as u16,
            reason: Reason::Vote
        }
    );
    // Winner at the cap (loads: winner 9, others 1 -> total 12, cap ceil(1.05*13/4) = 4):
    // the next ranked positive replica, Overflow.
    let mut loads = vec![1; 4];
    loads[winner] = 9;
    let d = route(
        policy.as_ref(),
        "apple banana cherry",
        &StaticLoad::new(loads.clone()),
        &mut rng,
    );
    assert_eq!(
        d,
        Decision {
            replica: SECOND_ABC as u16,
            reason: Reason::Overflow
        }
    );
    // Every voted replica at the cap: a uniformly random live replica under the cap.
    for (r, &s) in scores.iter().enumerate() {
        if s > 0 {
            loads[r] = 9;
        }
    }
    let total: u64 = loads.iter().sum();
    let cap = load_cap(0.05, total, 4);
    for _ in 0..50 {
        let d = route(
            policy.as_ref(),
            "apple banana cherry",
            &StaticLoad::new(loads.clone()),
            &mut rng,
        );
        assert_eq!(d.reason, Reason::Overflow);
        assert!(loads[usize::from(d.replica)] < cap);
    }
    // A query with no terms has no votes: random, NoVote.
    let d = route(policy.as_ref(), "", &idle, &mut rng);
    assert_eq!(d.reason, Reason::NoVote);
    assert_eq!(DEFAULT_TERM_BYTES, 21);
}

#[test]
fn hand_table_votes_fallback_and_abstention() {
    let t = table(
        4,
        &[
            ("york", 1, 2.0),
            ("york", 3, 1.0),
            ("new", 3, 1.5),
            ("maps", 2, 0.0), // abstains
            ("tiny", 0, 0.001),
        ],
    );
    let params = PolicyParams::new(4).with_table(Arc::new(t.clone()));
    let policy = build_policy(PolicyKind::Table, &params).expect("valid");
    let mut rng = Rng::new(1);
    let idle = StaticLoad::idle(4);
    // "new york": replica 3 = 1.0 + 1.5 = 2.5, replica 1 = 2.0 -> 3, Vote.
    let d = route(policy.as_ref(), "new york", &idle, &mut rng);
    assert_eq!(
        d,
        Decision {
            replica: 3,
            reason: Reason::Vote
        }
    );
    // Replica 3 at the cap (loads [1, 1, 1, 9]: total 12, cap 4) -> replica 1, Overflow.
    let d = route(
        policy.as_ref(),
        "new york",
        &StaticLoad::new(vec![1, 1, 1, 9]),
        &mut rng,
    );
    assert_eq!(
        d,
        Decision {
            replica: 1,
            reason: Reason::Overflow
        }
    );
    // A missing term never outweighs a table vote, however many bytes it has:
    // "tiny zebra" -> tiny's 0.001 for replica 0 beats zebra's fallback.
    let mut tb = TermBytes::default();
    tb.insert(term_hash("zebra"), u64::MAX);
    let zebra_home = term_hash("zebra") % 4;
    assert_ne!(zebra_home, 0, "pick another term");
    let params = PolicyParams::new(4)
        .with_table(Arc::new(t.clone()))
        .with_term_bytes(Arc::new(tb));
    let big = build_policy(PolicyKind::Table, &params).expect("valid");
    let d = route(big.as_ref(), "tiny zebra", &idle, &mut rng);
    assert_eq!(
        d,
        Decision {
            replica: 0,
            reason: Reason::Vote
        }
    );
    // Alone, the missing term votes for term_hash % 4, Vote.
    let d = route(big.as_ref(), "zebra", &idle, &mut rng);
    assert_eq!(
        d,
        Decision {
            replica: zebra_home as u16,
            reason: Reason::Vote
        }
    );
    // An abstaining term is in the table: no fallback vote, so "maps" alone is NoVote.
    let d = route(policy.as_ref(), "maps", &idle, &mut rng);
    assert_eq!(d.reason, Reason::NoVote);
    // Compiled form.
    let votes = TableVotes::build(&t, 4, Arc::new(TermBytes::default())).expect("valid");
    assert_eq!(votes.terms(), 4);
    assert_eq!(votes.vote_count(), 4);
    assert_eq!(votes.get(term_hash("maps")), Some(&[][..]));
    assert_eq!(
        votes.get(term_hash("york")),
        Some(&[(1, 2.0), (3, 1.0)][..])
    );
    assert_eq!(votes.get(term_hash("zebra")), None);
    let mut s = Scores::new();
    votes.add_votes(term_hash("zebra"), &mut s);
    assert_eq!(s.votes(zebra_home as usize), 0.0);
    assert_eq!(s.fallback(zebra_home as usize), 21.0);
}
