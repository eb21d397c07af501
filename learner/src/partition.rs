//! Balanced R-way partitioning of the term–query graph with METIS (Karypis and Kumar,
//! "A fast and high quality multilevel scheme for partitioning irregular graphs", SIAM J.
//! Sci. Comput. 1998), through the `metis` crate's vendored build.
//!
//! Multilevel k-way partitioning, minimizing the weighted edge cut (flash bytes of terms
//! fetched away from their home) subject to both vertex-weight constraints (query load and
//! term bytes) staying within `ufactor` thousandths of perfect balance. The seed is fixed, so
//! a partition is reproducible.

use metis::option::{Seed, UFactor};
use metis::Graph;

use crate::graph::TermQueryGraph;

/// Why METIS failed.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    /// The graph was rejected or METIS failed.
    #[error("METIS failed: {0}")]
    Metis(String),
}

/// A partition: one part per vertex, and the weighted edge cut METIS reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// Part (replica) of each vertex.
    pub part: Vec<u16>,
    /// Weighted edge cut.
    pub edge_cut: i64,
}

/// Serializes METIS calls (see [`partition`]).
static METIS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Partitions `graph` into `parts` parts with imbalance `ufactor` (thousandths: 30 = 3%).
pub fn partition(
    graph: &TermQueryGraph,
    parts: usize,
    ufactor: i32,
    seed: u64,
) -> Result<Partition, PartitionError> {
    let n = graph.vertices();
    if parts <= 1 {
        return Ok(Partition {
            part: vec![0; n],
            edge_cut: 0,
        });
    }
    let mut part = vec![0i32; n];
    let err = |e: &dyn std::fmt::Display| PartitionError::Metis(e.to_string());
    // METIS seeds one process-wide random generator (GKlib's), so two partitions running
    // at once would draw from each other's sequence and stop being reproducible.
    let _one_at_a_time = METIS.lock().unwrap_or_else(|e| e.into_inner());
    let cut = Graph::new(
        crate::graph::CONSTRAINTS as i32,
        parts as i32,
        &graph.xadj,
        &graph.adjncy,
    )
    .map_err(|e| err(&format!("{e:?}")))?
    .set_vwgt(&graph.vwgt)
    .set_adjwgt(&graph.adjwgt)
    .set_option(UFactor(ufactor))
    .set_option(Seed((seed % (i32::MAX as u64)) as i32))
    .part_kway(&mut part)
    .map_err(|e| err(&format!("{e:?}")))?;
    Ok(Partition {
        part: part.into_iter().map(|p| p as u16).collect(),
        edge_cut: i64::from(cut),
    })
}
