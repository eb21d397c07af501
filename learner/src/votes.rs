//! Votes per term, and their conversion to the voting-table format.
//!
//! [`TermVotes`] holds, for each trace term id, the replicas it votes for and the weights;
//! an empty list means the term abstains (it is left out of the table, so the `table`
//! policy's low-priority fallback applies to it). The initial votes come straight from the
//! partition: each partitioned term votes for its part with weight equal to its postings
//! bytes, the weight `term-vote` would give it.

use std::collections::BTreeMap;

use cache_sim::sim::Trace;
use data::table::{TableError, TableRow, VotingTable};

use crate::graph::TermQueryGraph;
use crate::partition::Partition;

/// Votes of every term of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TermVotes {
    /// Replica count.
    pub replicas: u16,
    /// `votes[t]`: (replica, weight) pairs of trace term `t`; empty = abstain.
    pub votes: Vec<Vec<(u16, f32)>>,
}

impl TermVotes {
    /// Each term vertex of `graph` votes for its part with weight = postings bytes.
    pub fn from_partition(
        trace: &Trace,
        graph: &TermQueryGraph,
        partition: &Partition,
        replicas: u16,
    ) -> TermVotes {
        let mut votes = vec![Vec::new(); trace.dict.len()];
        for (v, &t) in graph.term_ids.iter().enumerate() {
            let bytes = trace.term_bytes[t as usize] as f32;
            votes[t as usize] = vec![(partition.part[v], bytes)];
        }
        TermVotes { replicas, votes }
    }

    /// Number of terms that vote.
    pub fn voting_terms(&self) -> usize {
        self.votes.iter().filter(|v| !v.is_empty()).count()
    }

    /// The voting table of these votes (rows sorted by term for reproducible files).
    pub fn to_table(
        &self,
        trace: &Trace,
        metadata: BTreeMap<String, String>,
    ) -> Result<VotingTable, TableError> {
        let mut rows: Vec<TableRow> = Vec::with_capacity(self.voting_terms());
        for (t, list) in self.votes.iter().enumerate() {
            for &(replica, weight) in list {
                rows.push(TableRow {
                    term: trace.dict.term(t as u32).to_owned(),
                    replica,
                    weight,
                });
            }
        }
        rows.sort_by(|a, b| a.term.cmp(&b.term).then(a.replica.cmp(&b.replica)));
        VotingTable::new(self.replicas, rows, metadata)
    }
}
