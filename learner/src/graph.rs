//! The bipartite term–query graph in CSR form, ready for METIS.
//!
//! Vertices are the kept terms (`0..terms`) followed by the distinct queries. Each query is
//! joined to each of its kept terms. Weights:
//!
//! - **Vertex weights, two constraints.** Constraint 0 is query load: a query vertex weighs
//!   its count and a term vertex 0, so balanced parts mean balanced queries per replica.
//!   Constraint 1 is cached bytes: a term vertex weighs its postings bytes and a query 0, so
//!   no replica is asked to cache far more than the others.
//! - **Edge weights.** Cutting edge (t, q) sends q to a replica that is not t's home, where
//!   t's postings must be fetched again: up to `count(q) · bytes(t)` flash bytes. That is
//!   the raw weight.
//!
//! METIS's `idx_t` is 32-bit and METIS sums weights internally, so every weight family is
//! scaled linearly to a fixed budget (the sum of all edge weights, counted in both
//! directions, at most 2^29; each vertex-weight constraint summing to at most 2^29), with a
//! floor of 1 for positive raw weights. Relative weights keep their order; tiny ones round
//! up to 1.

use cache_sim::sim::Trace;

use crate::aggregate::Aggregate;

/// Budget for each scaled weight family.
pub const WEIGHT_BUDGET: f64 = (1u64 << 29) as f64;

/// METIS balance constraints per vertex: query load, cached bytes, requested bytes.
pub const CONSTRAINTS: usize = 3;

/// A CSR graph with METIS weights.
#[derive(Clone, Debug, PartialEq)]
pub struct TermQueryGraph {
    /// Trace term id of each term vertex.
    pub term_ids: Vec<u32>,
    /// Number of query vertices (they follow the term vertices).
    pub queries: usize,
    /// CSR offsets, `vertices + 1` entries.
    pub xadj: Vec<i32>,
    /// CSR neighbours.
    pub adjncy: Vec<i32>,
    /// Edge weights, parallel to `adjncy`.
    pub adjwgt: Vec<i32>,
    /// Vertex weights, two per vertex: (query load, term bytes).
    pub vwgt: Vec<i32>,
}

/// Why a graph cannot be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GraphError {
    /// More vertices or edges than METIS's 32-bit indices hold.
    #[error("the term-query graph is too large for 32-bit METIS ({0})")]
    TooLarge(String),
    /// Nothing to partition.
    #[error("the train part has no query with a kept term")]
    Empty,
}

impl TermQueryGraph {
    /// Number of vertices.
    pub fn vertices(&self) -> usize {
        self.xadj.len() - 1
    }

    /// Number of undirected edges.
    pub fn edges(&self) -> usize {
        self.adjncy.len() / 2
    }
}

fn scale(raw: f64, total: f64) -> i32 {
    if raw <= 0.0 || total <= 0.0 {
        return 0;
    }
    ((raw / total * WEIGHT_BUDGET).round() as i64).clamp(1, i64::from(i32::MAX / 4)) as i32
}

/// Builds the graph of `agg` (term bytes from `trace`).
pub fn build_graph(trace: &Trace, agg: &Aggregate) -> Result<TermQueryGraph, GraphError> {
    if agg.queries.is_empty() {
        return Err(GraphError::Empty);
    }
    // Dense vertex ids for kept terms that occur in some kept query.
    let mut vertex_of = vec![u32::MAX; agg.kept.len()];
    let mut term_ids = Vec::new();
    let mut degree: Vec<u32> = Vec::new();
    for q in &agg.queries {
        for &t in &q.terms {
            if vertex_of[t as usize] == u32::MAX {
                vertex_of[t as usize] = term_ids.len() as u32;
                term_ids.push(t);
                degree.push(0);
            }
            degree[vertex_of[t as usize] as usize] += 1;
        }
    }
    let n_terms = term_ids.len();
    let n = n_terms + agg.queries.len();
    let directed: usize = 2 * agg.queries.iter().map(|q| q.terms.len()).sum::<usize>();
    if n >= i32::MAX as usize || directed >= i32::MAX as usize {
        return Err(GraphError::TooLarge(format!(
            "{n} vertices, {directed} directed edges"
        )));
    }
    let raw_edge = |t: u32, count: u32| count as f64 * trace.term_bytes[t as usize] as f64;
    let edge_total: f64 = 2.0
        * agg
            .queries
            .iter()
            .flat_map(|q| q.terms.iter().map(move |&t| raw_edge(t, q.count)))
            .sum::<f64>();
    let load_total: f64 = agg.queries.iter().map(|q| f64::from(q.count)).sum();
    let bytes_total: f64 = term_ids
        .iter()
        .map(|&t| trace.term_bytes[t as usize] as f64)
        .sum();

    let mut xadj = Vec::with_capacity(n + 1);
    xadj.push(0i32);
    let mut acc = 0i32;
    for &d in &degree {
        acc += d as i32;
        xadj.push(acc);
    }
    for q in &agg.queries {
        acc += q.terms.len() as i32;
        xadj.push(acc);
    }
    let mut adjncy = vec![0i32; directed];
    let mut adjwgt = vec![0i32; directed];
    let mut fill: Vec<i32> = xadj[..n_terms].to_vec();
    for (qi, q) in agg.queries.iter().enumerate() {
        let qv = (n_terms + qi) as i32;
        let start = xadj[n_terms + qi] as usize;
        for (pos, &t) in (start..).zip(&q.terms) {
            let tv = vertex_of[t as usize] as usize;
            let w = scale(raw_edge(t, q.count), edge_total);
            adjncy[pos] = tv as i32;
            adjwgt[pos] = w;
            let slot = fill[tv] as usize;
            adjncy[slot] = qv;
            adjwgt[slot] = w;
            fill[tv] += 1;
        }
    }
    // The traffic of a term: the postings bytes its queries request, count(q)·bytes(t)
    // summed over its queries (its weighted degree, one direction).
    let mut traffic = vec![0f64; n_terms];
    for q in &agg.queries {
        for &t in &q.terms {
            traffic[vertex_of[t as usize] as usize] += raw_edge(t, q.count);
        }
    }
    let traffic_total = edge_total / 2.0;
    let mut vwgt = Vec::with_capacity(CONSTRAINTS * n);
    for (v, &t) in term_ids.iter().enumerate() {
        vwgt.push(0);
        vwgt.push(scale(trace.term_bytes[t as usize] as f64, bytes_total));
        vwgt.push(scale(traffic[v], traffic_total));
    }
    for q in &agg.queries {
        vwgt.push(scale(f64::from(q.count), load_total));
        vwgt.push(0);
        vwgt.push(0);
    }
    Ok(TermQueryGraph {
        term_ids,
        queries: agg.queries.len(),
        xadj,
        adjncy,
        adjwgt,
        vwgt,
    })
}
