//! A voting table's rows by trace term id, with each term's top vote: what the miss
//! breakdown ([`super::misses`]) and the movement of a table change ([`super::movement`])
//! read.

use data::table::VotingTable;

use super::trace::Trace;

/// The rows of a table whose term the trace has.
pub struct TableTerms {
    /// `(term id, replica, weight)` per row.
    pub rows: Vec<(usize, u16, f32)>,
    /// Per term id: its top vote `(replica, weight)` (of equal weights the lowest replica,
    /// as the balancer ranks), `None` without a row.
    pub top: Vec<Option<(u16, f32)>>,
}

impl TableTerms {
    /// The rows of `table` under `trace`'s term ids.
    pub fn new(trace: &Trace, table: &VotingTable) -> TableTerms {
        let mut top: Vec<Option<(u16, f32)>> = vec![None; trace.dict.len()];
        let rows: Vec<(usize, u16, f32)> = table
            .rows
            .iter()
            .filter_map(|row| Some((trace.dict.get(&row.term)? as usize, row.replica, row.weight)))
            .collect();
        for &(t, r, w) in &rows {
            if top[t].is_none_or(|(best_r, best)| w > best || (w == best && r < best_r)) {
                top[t] = Some((r, w));
            }
        }
        TableTerms { rows, top }
    }
}
