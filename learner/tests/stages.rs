//! Tests of the learner's stages on tiny hand-made logs whose graph, weights and best
//! partition can be worked out by hand.

use cache_sim::sim::Trace;
use data::sizes::{SizeTable, Sizes};
use learner::aggregate::{aggregate, aggregate_weighted};
use learner::graph::build_graph;
use learner::partition::partition;

fn sizes(pairs: &[(&str, u64)]) -> Sizes {
    Sizes::Table(SizeTable::from_pairs(
        pairs.iter().map(|(t, b)| (t.to_string(), *b)),
    ))
}

#[test]
fn counted_queries_aggregate_like_the_records_they_count() {
    // The records "a b", "b c", "a b", "d", "A  b" against the distinct texts with counts
    // (as an engine hands them over): "A  b" normalizes to "a b", so it merges.
    let s = sizes(&[("a", 100), ("b", 50), ("c", 7), ("d", 9)]);
    let records = Trace::build(["a b", "b c", "a b", "d", "A  b"], 5, &s);
    let counted = Trace::build(["A  b", "a b", "b c", "d"], 4, &s);
    let weights = [1, 2, 1, 1];
    for min in [1, 2, 4] {
        let by_record = aggregate(&records, 5, min);
        let by_count = aggregate_weighted(&counted, 4, |q| weights[q], min);
        assert_eq!(by_count.prune, by_record.prune, "min freq {min}");
        let freq = |agg: &learner::aggregate::Aggregate, t: &Trace| {
            let mut f: Vec<(String, u32)> = (0..t.dict.len())
                .map(|i| (t.dict.term(i as u32).to_owned(), agg.term_freq[i]))
                .collect();
            f.sort();
            f
        };
        assert_eq!(freq(&by_count, &counted), freq(&by_record, &records));
        let mut counts: Vec<u32> = by_count.queries.iter().map(|q| q.count).collect();
        let mut expected: Vec<u32> = by_record.queries.iter().map(|q| q.count).collect();
        counts.sort();
        expected.sort();
        assert_eq!(counts, expected, "min freq {min}");
    }
}

#[test]
fn graph_of_a_tiny_log_has_exact_vertices_edges_and_weights() {
    // Train part: all four queries. min_term_freq 2 keeps a (2 queries) and b (3), prunes
    // c and d (1 each); "d" has no kept term and is dropped.
    let s = sizes(&[("a", 100), ("b", 50), ("c", 7), ("d", 9)]);
    let trace = Trace::build(["a b", "b c", "a b", "d"], 4, &s);
    let agg = aggregate(&trace, 4, 2);
    assert_eq!(agg.prune.terms_seen, 4);
    assert_eq!(agg.prune.terms_kept, 2);
    assert_eq!(agg.prune.queries_seen, 3);
    assert_eq!(agg.prune.queries_kept, 2);
    // Occurrences: a 2, b 3, c 1, d 1 → kept 5 of 7.
    assert!((agg.prune.kept_occurrence_share - 5.0 / 7.0).abs() < 1e-12);

    let g = build_graph(&trace, &agg).unwrap();
    // Vertices: a, b (terms, first appearance), then "a b" (count 2) and "b c" → [b].
    assert_eq!(g.vertices(), 4);
    assert_eq!(g.edges(), 3);
    assert_eq!(g.xadj, vec![0, 1, 3, 5, 6]);
    assert_eq!(g.adjncy, vec![2, 2, 3, 0, 1, 1]);
    // Raw edge weights count(q)·bytes(t): (a, ab) 200, (b, ab) 100, (b, bc) 50; both
    // directions sum to 700, scaled to 2^29: 200/700·2^29 = 153,391,689.1 and so on.
    let (ab_a, ab_b, bc_b) = (153_391_689, 76_695_845, 38_347_922);
    assert_eq!(g.adjwgt, vec![ab_a, ab_b, bc_b, ab_a, ab_b, bc_b]);
    // Vertex weights (load, bytes, traffic): terms (0, bytes share, traffic share),
    // queries (count share, 0, 0). Traffic is the requested bytes count(q)·bytes(t) over
    // the term's queries: a 200, b 100 + 50 = 150, of 350: 200/350·2^29 = 306,783,378.3
    // and 150/350·2^29 = 230,087,533.7.
    assert_eq!(
        g.vwgt,
        vec![
            0,
            357_913_941,
            306_783_378,
            0,
            178_956_971,
            230_087_534,
            357_913_941,
            0,
            0,
            178_956_971,
            0,
            0
        ]
    );
}

#[test]
fn metis_finds_the_two_obvious_communities() {
    // Two triangles of terms, each term pair queried 10 times, joined by one rare query.
    let mut log = Vec::new();
    for _ in 0..10 {
        log.extend(["a b", "a c", "b c", "x y", "x z", "y z"]);
    }
    log.push("c x");
    let s = sizes(&[
        ("a", 100),
        ("b", 100),
        ("c", 100),
        ("x", 100),
        ("y", 100),
        ("z", 100),
    ]);
    let trace = Trace::build(log.iter().copied(), log.len(), &s);
    let agg = aggregate(&trace, log.len(), 1);
    let g = build_graph(&trace, &agg).unwrap();
    let p = partition(&g, 2, 30, 1).unwrap();
    let part_of = |term: &str| {
        let id = trace.dict.get(term).unwrap();
        let v = g.term_ids.iter().position(|&t| t == id).unwrap();
        p.part[v]
    };
    assert_eq!(part_of("a"), part_of("b"));
    assert_eq!(part_of("b"), part_of("c"));
    assert_eq!(part_of("x"), part_of("y"));
    assert_eq!(part_of("y"), part_of("z"));
    assert_ne!(part_of("a"), part_of("x"));
    // Only the bridge query's edge to one of its terms is cut.
    let bridge_edge = *g.adjwgt.iter().min().unwrap();
    assert_eq!(p.edge_cut, i64::from(bridge_edge));
}
